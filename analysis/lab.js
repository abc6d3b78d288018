// The lab: the run's model, computed in the page (plain JavaScript, float64), as model/ computes it.
// analysis/lab.py packs the payload: weights, the position tables, the heads' means and the problem format.
// Heads are switched at hook_z, as model/hooks.py does: "on", "off" (zeros), "mean" (its mean output), or
// patched from another run's z.
"use strict";

const TinycalcLab = (() => {
  function unpack(p) {  // {shape, data: base64 float32 LE} -> {shape, v: Float32Array}
    const bytes = Uint8Array.from(atob(p.data), (c) => c.charCodeAt(0));
    return { shape: p.shape, v: new Float32Array(bytes.buffer) };
  }

  function load(payload) {
    const w = {};
    for (const [name, p] of Object.entries(payload.weights)) w[name] = unpack(p);
    return {
      cfg: payload.config, fmt: payload.format, w,
      positions: unpack(payload.positions),
      scores: payload.scores.map((s) => (s ? unpack(s) : null)),
      queryScale: payload.query_scale ? unpack(payload.query_scale) : null,
      means: unpack(payload.means),
    };
  }

  // ---- the pieces of a forward pass: rows of d floats ------------------------------------------------
  function linear(x, W, b) {  // x: rows of n_in; W: (n_out, n_in) -> rows of n_out
    const [nOut, nIn] = W.shape;
    return x.map((row) => {
      const out = new Float64Array(nOut);
      for (let o = 0; o < nOut; o++) {
        let s = b ? b.v[o] : 0;
        for (let i = 0; i < nIn; i++) s += W.v[o * nIn + i] * row[i];
        out[o] = s;
      }
      return out;
    });
  }

  function layerNorm(x, g, b) {
    return x.map((row) => {
      const n = row.length;
      let mean = 0, vr = 0;
      for (const a of row) mean += a;
      mean /= n;
      for (const a of row) vr += (a - mean) * (a - mean);
      const inv = 1 / Math.sqrt(vr / n + 1e-5);
      return row.map((a, i) => (a - mean) * inv * g.v[i] + (b ? b.v[i] : 0));
    });
  }

  function erf(x) {  // W. J. Cody's rational approximations, relative error < 1e-15 (torch's gelu is erf-exact)
    const ax = Math.abs(x);
    let r;
    if (ax < 0.5) {
      const t = x * x;
      const p = [3.16112374387056560e0, 1.13864154151050156e2, 3.77485237685302021e2, 3.20937758913846947e3,
        1.85777706184603153e-1];
      const q = [2.36012909523441209e1, 2.44024637934444173e2, 1.28261652607737228e3, 2.84423683343917062e3];
      const num = (((p[4] * t + p[0]) * t + p[1]) * t + p[2]) * t + p[3];
      const den = (((t + q[0]) * t + q[1]) * t + q[2]) * t + q[3];
      return x * num / den;
    }
    if (ax < 4) {
      const p = [5.64188496988670089e-1, 8.88314979438837594e0, 6.61191906371416295e1, 2.98635138197400131e2,
        8.81952221241769090e2, 1.71204761263407058e3, 2.05107837782607147e3, 1.23033935479799725e3,
        2.15311535474403846e-8];
      const q = [1.57449261107098347e1, 1.17693950891312499e2, 5.37181101862009858e2, 1.62138957456669019e3,
        3.29079923573345963e3, 4.36261909014324716e3, 3.43936767414372164e3, 1.23033935480374942e3];
      let num = p[8] * ax, den = ax;
      for (let i = 0; i < 7; i++) { num = (num + p[i]) * ax; den = (den + q[i]) * ax; }
      r = 1 - Math.exp(-ax * ax) * (num + p[7]) / (den + q[7]);
    } else {
      const p = [3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
        6.58749161529837803e-4, 1.63153871373020978e-2];
      const q = [2.56852019228982242e0, 1.87295284992346725e0, 5.27905102951428412e-1, 6.05183413124413191e-2,
        2.33520497626869185e-3];
      const z = 1 / (ax * ax);
      let num = p[5] * z, den = z;
      for (let i = 0; i < 4; i++) { num = (num + p[i]) * z; den = (den + q[i]) * z; }
      const frac = z * (num + p[4]) / (den + q[4]);
      r = 1 - Math.exp(-ax * ax) / ax * (1 / Math.sqrt(Math.PI) - frac);
    }
    return x < 0 ? -r : r;
  }

  const gelu = (a) => 0.5 * a * (1 + erf(a / Math.SQRT2));

  // ---- the forward pass -------------------------------------------------------------------------------
  // ids: token ids (T <= the trained sequence); switches: {"L0h1": "off" | "mean" | "on"}; patch: {"L0h1": z
  // rows from another run} (a head patched takes those). -> {logits: T rows of vocab, patterns[layer][head]: T x T,
  // z[layer]: T rows of n_heads * head_dim}
  function forward(m, ids, switches = {}, patch = {}) {
    const { cfg, w } = m;
    const T = ids.length, d = cfg.d_model, H = cfg.n_heads, hd = cfg.head_dim, group = H / cfg.n_kv_heads;
    const full = m.positions.shape[0];
    if (T > full) throw new Error(`${T} tokens: longer than the trained ${full}`);
    let x = ids.map((id, t) => {
      const row = new Float64Array(d);
      for (let i = 0; i < d; i++) row[i] = w["tok_emb.weight"].v[id * d + i] + m.positions.v[t * d + i];
      return row;
    });
    const patterns = [], zs = [];
    for (let L = 0; L < cfg.n_layers; L++) {
      const p = `blocks.${L}.`;
      const h = layerNorm(x, w[p + "ln_attn.weight"], w[p + "ln_attn.bias"]);
      const q = linear(h, w[p + "attn.W_q.weight"], w[p + "attn.W_q.bias"]);
      const k = linear(h, w[p + "attn.W_k.weight"], w[p + "attn.W_k.bias"]);
      const v = linear(h, w[p + "attn.W_v.weight"], w[p + "attn.W_v.bias"]);
      const z = Array.from({ length: T }, () => new Float64Array(H * hd));
      const layerPatterns = [];
      const bias = m.scores[L];
      for (let hh = 0; hh < H; hh++) {
        const kv = Math.floor(hh / group);
        const pattern = [];
        for (let i = 0; i < T; i++) {
          const scale = m.queryScale ? m.queryScale.v[i] : 1;
          const row = new Float64Array(T).fill(-Infinity);
          for (let j = 0; j <= i; j++) {
            let s = 0;
            for (let e = 0; e < hd; e++) s += q[i][hh * hd + e] * scale * k[j][kv * hd + e];
            s /= Math.sqrt(hd);
            if (bias) s += bias.v[(hh * full + i) * full + j];
            row[j] = s;
          }
          const top = Math.max(...row);
          let sum = 0;
          for (let j = 0; j < T; j++) { row[j] = top === -Infinity ? 0 : Math.exp(row[j] - top); sum += row[j]; }
          for (let j = 0; j < T; j++) row[j] = sum > 0 ? row[j] / sum : 0;
          pattern.push(row);
          for (let j = 0; j <= i; j++) {
            if (!row[j]) continue;
            for (let e = 0; e < hd; e++) z[i][hh * hd + e] += row[j] * v[j][kv * hd + e];
          }
        }
        layerPatterns.push(pattern);
        const label = `L${L}h${hh}`, how = switches[label] || "on";
        for (let i = 0; i < T; i++) {
          for (let e = 0; e < hd; e++) {
            if (patch[label]) z[i][hh * hd + e] = patch[label][i][hh * hd + e];
            else if (how === "off") z[i][hh * hd + e] = 0;
            else if (how === "mean") z[i][hh * hd + e] = m.means.v[((L * H + hh) * full + i) * hd + e];
          }
        }
      }
      patterns.push(layerPatterns);
      zs.push(z);
      const out = linear(z, w[p + "attn.W_o.weight"], w[p + "attn.W_o.bias"]);
      x = x.map((row, t) => row.map((a, i) => a + out[t][i]));
      const hidden = linear(layerNorm(x, w[p + "ln_mlp.weight"], w[p + "ln_mlp.bias"]),
        w[p + "mlp.fc_in.weight"], w[p + "mlp.fc_in.bias"]).map((row) => row.map(gelu));
      const mlp = linear(hidden, w[p + "mlp.fc_out.weight"], w[p + "mlp.fc_out.bias"]);
      x = x.map((row, t) => row.map((a, i) => a + mlp[t][i]));
    }
    const logits = linear(layerNorm(x, w["ln_f.weight"], w["ln_f.bias"]), w["lm_head.weight"] || w["tok_emb.weight"]);
    return { logits, patterns, z: zs };
  }

  // ---- problems: written as data/problems.py writes them ------------------------------------------------
  function encodeProblem(m, text) {  // -> {ids, a, op, b} or {error}
    const f = m.fmt;
    const match = /^\s*(\d+)\s*([+\-*])\s*(\d+)\s*=?\s*$/.exec(text);
    if (!match) return { error: "write a problem as a+b, a-b or a*b (whole numbers)" };
    const [, a, op, b] = match;
    const known = [...f.operators].map((o) => `'${o}'`).join(" ");
    if (!f.operators.includes(op)) return { error: `this model was not trained on '${op}' (only on ${known})` };
    for (const n of [a, b]) {  // calc.py's words (data/expressions.py)
      const significant = n.replace(/^0+(?=\d)/, "");
      if (significant.length > f.digits) {
        return { error: `${significant} has ${significant.length} digits; this model was trained on at most ${f.digits}` };
      }
    }
    if (op === "-" && f.larger_first && BigInt(a) < BigInt(b)) return { error: "this model writes a - b with a >= b" };
    const pad = (n) => n.replace(/^0+(?=\d)/, "").padStart(f.digits, "0");
    const ids = [f.vocab["[BOS]"], ...[...(pad(a) + op + pad(b) + "=")].map((c) => f.vocab[c])];
    return { ids, a: BigInt(a), op, b: BigInt(b) };
  }

  function softmax(row) {
    const top = Math.max(...row);
    const e = Array.from(row, (a) => Math.exp(a - top));
    const s = e.reduce((x, y) => x + y, 0);
    return e.map((a) => a / s);
  }

  // Greedy decoding of the whole answer; each step's token, its probability and the runner-up.
  function decode(m, promptIds, switches = {}) {
    const names = Object.fromEntries(Object.entries(m.fmt.vocab).map(([t, i]) => [i, t]));
    const ids = [...promptIds], steps = [];
    let last = null;  // the last step's pass: the whole problem but its last token, with every head's pattern
    for (let n = 0; n < m.fmt.answer_len; n++) {
      last = forward(m, ids, switches);
      const probs = softmax(last.logits[ids.length - 1]);
      const order = probs.map((p, i) => [p, i]).sort((x, y) => y[0] - x[0]);
      steps.push({ token: names[order[0][1]], p: order[0][0], second: names[order[1][1]], p2: order[1][0] });
      ids.push(order[0][1]);
    }
    const written = steps.map((s) => s.token).join("");
    return { ids, steps, written, answer: answerOf(m, written), patterns: last.patterns };
  }

  function answerOf(m, written) {  // ProblemFormat.parse_answer: the result at the end, in reading order
    const f = m.fmt;
    let plain = written.slice(written.length - f.result_len);
    if (f.reverse_answer) plain = [...plain].reverse().join("");
    let sign = 1n;
    if (f.signed) { sign = plain[0] === "-" ? -1n : 1n; plain = plain.slice(1); }
    return /^\d+$/.test(plain) ? sign * BigInt(plain) : null;
  }

  // ---- the lab section: a problem, its answer token by token, a switch per head, maps, patching --------
  const STATES = ["on", "off", "mean"];

  function el(tag, attrs = {}, ...children) {  // DOM from data: text only, never HTML
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    for (const c of children) node.append(c);
    return node;
  }

  function heatmap(pattern, size = 120) {  // one head's T x T attention as a canvas
    const T = pattern.length, canvas = el("canvas", { width: size, height: size, class: "lab-map" });
    const ctx = canvas.getContext("2d"), cell = size / T;
    for (let i = 0; i < T; i++) {
      for (let j = 0; j < T; j++) {
        const a = pattern[i][j];
        ctx.fillStyle = `rgb(${255 - 200 * a}, ${255 - 170 * a}, ${255 - 60 * a})`;
        ctx.fillRect(j * cell, i * cell, Math.ceil(cell), Math.ceil(cell));
      }
    }
    return canvas;
  }

  function readState(m) {
    const state = { problem: defaultProblem(m), corrupted: "", switches: {} };
    const hash = new URLSearchParams(location.hash.slice(1));  // "#attention" and the like are the page's anchors
    if (!hash.has("problem")) return state;
    state.problem = hash.get("problem");
    if (hash.has("corrupted")) state.corrupted = hash.get("corrupted");
    for (const pair of (hash.get("heads") || "").split(",").filter(Boolean)) {
      const [label, how] = pair.split(":");
      if (/^L\d+h\d+$/.test(label) && STATES.includes(how)) state.switches[label] = how;
    }
    return state;
  }

  function writeState(state) {
    const heads = Object.entries(state.switches).filter(([, v]) => v !== "on").map(([k, v]) => `${k}:${v}`);
    const hash = new URLSearchParams({ problem: state.problem, corrupted: state.corrupted, heads: heads.join(",") });
    history.replaceState(null, "", `#${hash}`);
  }

  function defaultProblem(m) {
    const op = m.fmt.operators[0], nines = "9".repeat(m.fmt.digits - 1);  // 199+1: a carry across the places
    return op === "+" ? `1${nines}+1` : `1${nines}${op}1`;
  }

  // The logit difference of the first answer token where the clean and corrupted answers differ.
  function patching(m, clean, corrupted, switches) {
    const a = decode(m, clean.ids, switches), b = decode(m, corrupted.ids, switches);
    const at = a.ids.findIndex((id, i) => i >= clean.ids.length && id !== b.ids[i]);
    if (at < 0) return null;
    const right = a.ids[at], wrong = b.ids[at];
    const ld = (logits) => logits[at - 1][right] - logits[at - 1][wrong];
    const cleanRun = forward(m, a.ids.slice(0, at), switches), corruptRun = forward(m, b.ids.slice(0, at), switches);
    const ldClean = ld(cleanRun.logits), ldCorrupted = ld(corruptRun.logits);
    const rows = [];
    for (let L = 0; L < m.cfg.n_layers; L++) {
      for (let h = 0; h < m.cfg.n_heads; h++) {
        const label = `L${L}h${h}`;
        const patched = forward(m, b.ids.slice(0, at), switches, { [label]: cleanRun.z[L] });
        rows.push([label, (ld(patched.logits) - ldCorrupted) / (ldClean - ldCorrupted)]);
      }
    }
    return { position: at - clean.ids.length + 1, ldClean, ldCorrupted, rows };
  }

  function render(container, m) {
    const state = readState(m);
    const input = el("input", { type: "text", class: "lab-problem", value: state.problem, "aria-label": "problem" });
    const other = el("input", { type: "text", class: "lab-corrupted", value: state.corrupted,
      placeholder: "a second problem, to patch heads from the first", "aria-label": "corrupted problem" });
    const reset = el("button", { type: "button", class: "lab-reset" }, "reset");
    const answer = el("div", { class: "lab-answer" }), heads = el("div", { class: "lab-heads" });
    const maps = el("div", { class: "lab-maps" }), patched = el("div", { class: "lab-patching" });
    container.append(el("div", { class: "lab-inputs" }, input, other, reset), answer, heads, maps, patched);

    function update(byUser = true) {  // the state goes into the URL once the learner changes something
      const started = performance.now();
      state.problem = input.value;
      state.corrupted = other.value;
      if (byUser) writeState(state);
      answer.replaceChildren();
      maps.replaceChildren();
      patched.replaceChildren();
      const clean = encodeProblem(m, state.problem);
      if (clean.error) { answer.append(el("p", { class: "lab-error" }, `error: ${clean.error}`)); return; }
      const run = decode(m, clean.ids, state.switches);
      const truth = clean.op === "+" ? clean.a + clean.b : clean.op === "-" ? clean.a - clean.b : clean.a * clean.b;
      const verdict = run.answer === truth ? "right" : `wrong: ${truth}`;
      answer.append(el("p", {}, el("b", { class: "lab-result" }, `${run.answer ?? "?"}`), ` (${verdict})`));
      const tokens = el("p", { class: "lab-tokens" });
      for (const s of run.steps) {
        tokens.append(el("span", { class: "lab-token", title: `runner-up ${s.second}: ${(100 * s.p2).toFixed(1)}%` },
          `${s.token} ${(100 * s.p).toFixed(1)}%`), " ");
      }
      answer.append(tokens);
      run.patterns.forEach((layer, L) => layer.forEach((pattern, h) => {
        maps.append(el("figure", {}, heatmap(pattern), el("figcaption", {}, `L${L}h${h}`)));
      }));
      const corrupted = state.corrupted ? encodeProblem(m, state.corrupted) : null;
      if (corrupted && corrupted.error) patched.append(el("p", { class: "lab-error" }, `error: ${corrupted.error}`));
      else if (corrupted) {
        const p = patching(m, clean, corrupted, state.switches);
        if (!p) patched.append(el("p", {}, "the two problems get the same answer: nothing to patch"));
        else {
          patched.append(el("p", {}, `answer token ${p.position}: logit difference ${p.ldClean.toFixed(2)} (first) ` +
            `against ${p.ldCorrupted.toFixed(2)} (second); each head's first-problem output patched into the second ` +
            "restores this share of it:"));
          const table = el("table", { class: "lab-patch-table" });
          for (const [label, share] of p.rows) table.append(el("tr", {}, el("td", {}, label), el("td", {}, share.toFixed(3))));
          patched.append(table);
        }
      }
      container.dataset.ms = (performance.now() - started).toFixed(1);
    }

    for (let L = 0; L < m.cfg.n_layers; L++) {
      const row = el("div", { class: "lab-layer" }, `layer ${L}: `);
      for (let h = 0; h < m.cfg.n_heads; h++) {
        const label = `L${L}h${h}`;
        const button = el("button", { type: "button", class: "lab-switch", "data-head": label });
        const show = () => {
          button.dataset.state = state.switches[label] || "on";
          button.textContent = `${label} ${button.dataset.state}`;
        };
        button.addEventListener("click", () => {
          const now = STATES.indexOf(state.switches[label] || "on");
          state.switches[label] = STATES[(now + 1) % STATES.length];
          show();
          update();
        });
        show();
        row.append(button, " ");
      }
      heads.append(row);
    }
    input.addEventListener("input", update);
    other.addEventListener("input", update);
    reset.addEventListener("click", () => {
      state.switches = {};
      input.value = defaultProblem(m);
      other.value = "";
      heads.querySelectorAll(".lab-switch").forEach((b) => { b.dataset.state = "on"; b.textContent = `${b.dataset.head} on`; });
      update();
    });
    update(false);
  }

  return { load, forward, encodeProblem, decode, answerOf, softmax, render };
})();
