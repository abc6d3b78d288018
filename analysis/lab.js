// The lab: the run's model, computed in the page (plain JavaScript, float64), as model/ computes it.
// analysis/lab.py packs the payload: weights, the position tables, the heads' means and the problem format.
// Heads are switched at hook_z, as model/hooks.py does: "on", "off" (zeros), "mean" (its mean output), or
// patched from another run's z.
"use strict";

const TinycalcLab = (() => {
  // What the lab takes from outside: a problem typed or in the URL, an export's files dropped on it. Every size
  // they declare is held to these before any work is done; a larger one is one line, and the page keeps its model.
  const LIMITS = Object.freeze({
    problemChars: 64,  // a problem, typed or in the URL
    linkChars: 4096,  // the URL's fragment: the experiment a link carries
    configBytes: 1 << 16,  // config.json
    fileBytes: 256 << 20,  // model.safetensors
    headerBytes: 1 << 20,  // its JSON header
    tensors: 1024,  // tensors in it
    rank: 4,  // dimensions of one tensor
    layers: 48,
    heads: 64,  // per layer
    maps: 128,  // layers x heads: the maps and switches the lab draws
    width: 2048,  // d_model
    hidden: 8192,  // the MLP's width
    digits: 64,  // an operand's digits
    sequence: 512,  // prompt + answer tokens
    work: 2e9,  // multiply-adds to write one answer: answer tokens x sequence x parameters
  });

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
      calcDigits: payload.calc_digits || 0,  // the widest operands calc.py asks it (an export: unknown)
      experiments: payload.experiments || [],  // the run's guided experiments (analysis/lab.py), data
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

  // What the page does not ask a model that answers longer problems than it was trained on (calcDigits: the
  // widest operands calc.py asks it; 0 for an export), in one line; "" for the others.
  function longer(m) {
    if (!(m.calcDigits > m.fmt.digits)) return "";
    return `this page asks problems as wide as the model was trained on (${m.fmt.digits} digits); calc.py asks it ` +
      `up to ${m.calcDigits.toLocaleString("en-US")} digits: python calc.py --ckpt <this run's directory> <problem>`;
  }

  // ---- problems: written as data/problems.py writes them ------------------------------------------------
  function encodeProblem(m, text) {  // -> {ids, a, op, b} or {error}
    const f = m.fmt, forms = [...f.operators].map((o) => `a${o}b`).join(" or ");  // what this model was trained on
    if (text.length > LIMITS.problemChars) {  // first: nothing below reads a text longer than this
      return { error: `the problem is ${text.length.toLocaleString("en-US")} characters long; write one of at most ` +
        `${LIMITS.problemChars}, as ${forms}` };
    }
    const match = /^(\d+)\s*([^\d\s=])\s*(\d+)\s*=?$/.exec(text.trim());  // one \s* between tokens: linear
    if (!match) return { error: `write a problem as ${forms} (whole numbers)` };
    const [, a, op, b] = match;
    const known = [...f.operators].map((o) => `'${o}'`).join(" ");
    if (!f.operators.includes(op)) {
      return { error: `this model was not trained on '${op}', only on ${known}: write ${forms}` };
    }
    for (const n of [a, b]) {  // calc.py's words (data/expressions.py)
      const significant = n.replace(/^0+(?=\d)/, "");
      if (significant.length > f.digits) {
        return { error: `${significant} has ${significant.length} digits; this model was trained on at most ${f.digits}` +
          (longer(m) ? `: ${longer(m)}` : "") };
      }
    }
    const bSignificant = b.replace(/^0+(?=\d)/, "");
    if (f.b_limit && bSignificant.length > f.b_limit) {  // calc.py's words (data/expressions.py)
      return { error: `${bSignificant} has ${bSignificant.length} digits; this model multiplies by numbers of at ` +
        `most ${f.b_limit}` };
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

  // ---- a Hugging Face export opened in the page: python calc.py --export hf OUT writes config.json and ----
  // model.safetensors, our model under GPT-2's names (model/export.py); read back here into the lab's own model.

  // safetensors: 8 bytes, the header's length N (little-endian); N bytes of JSON {name: {dtype, shape,
  // data_offsets: [begin, end]}}, offsets into the data that follows; the data, little-endian. The tensors' bytes
  // tile the data exactly: each inside it, one after another, none overlapping, none left over.
  const cut = (text) => (text.length > 60 ? `${text.slice(0, 60)}...` : text);
  const named = (name) => (/^[\w.\-]{1,60}$/.test(name) ? name  // a name as data: quoted when odd, and short
    : JSON.stringify(name.length > 60 ? `${name.slice(0, 60)}...` : name));

  function readSafetensors(buffer) {  // ArrayBuffer -> Map name -> {shape, v: Float32Array}; an Error of one line
    const bytes = new DataView(buffer), size = buffer.byteLength;
    need(size >= 8, "model.safetensors is not a safetensors file (its header is cut)");
    const declared = bytes.getBigUint64(0, true);
    need(declared <= BigInt(LIMITS.headerBytes), `model.safetensors declares a ${declared}-byte header; the lab reads ` +
      `headers of at most ${LIMITS.headerBytes} bytes`);
    const n = Number(declared), start = 8 + n, dataBytes = size - start;
    need(start <= size, "model.safetensors is not a safetensors file (its header is cut)");
    let header;
    try { header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, n))); } catch (e) {
      throw new Error("model.safetensors is not a safetensors file (its header is not JSON)");
    }
    need(header && typeof header === "object" && !Array.isArray(header),
      "model.safetensors is not a safetensors file (its header is no table)");
    const entries = Object.entries(header).filter(([name]) => name !== "__metadata__");  // own keys, names as data
    need(entries.length <= LIMITS.tensors,
      `model.safetensors holds ${entries.length} tensors; the lab reads at most ${LIMITS.tensors}`);
    const spans = [];  // [begin, end, name, shape, count], checked whole before a value is read
    for (const [name, t] of entries) {
      need(t && typeof t === "object" && Array.isArray(t.shape) && Array.isArray(t.data_offsets) &&
        t.data_offsets.length === 2, `model.safetensors is damaged: ${named(name)} has no shape or data_offsets`);
      need(t.dtype === "F32", `model.safetensors holds ${named(name)} as ${named(String(t.dtype))}; the lab reads ` +
        "float32 (F32) weights only, as python calc.py --export hf writes them");
      need(t.shape.length <= LIMITS.rank, `model.safetensors is damaged: ${named(name)} has ${t.shape.length} ` +
        `dimensions; the lab reads at most ${LIMITS.rank}`);
      need(t.shape.every((x) => Number.isSafeInteger(x) && x >= 0),
        `model.safetensors is damaged: ${named(name)}'s shape ${cut(JSON.stringify(t.shape))} is not a list of sizes`);
      const [begin, end] = t.data_offsets, count = t.shape.reduce((x, y) => x * y, 1);
      need(Number.isSafeInteger(begin) && Number.isSafeInteger(end) && begin >= 0 && begin <= end && end <= dataBytes,
        `model.safetensors is damaged: ${named(name)}'s data_offsets ${JSON.stringify(t.data_offsets)} are not ` +
        `inside its data (0 to ${dataBytes})`);
      need(end - begin === 4 * count,
        `model.safetensors is damaged: ${named(name)}'s data does not fill its shape ${t.shape.join("x")}`);
      spans.push([begin, end, name, t.shape, count]);
    }
    spans.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let at = 0, before = null;
    for (const [begin, end, name] of spans) {
      need(begin >= at, `model.safetensors is damaged: ${named(name)}'s bytes overlap ${named(before)}'s`);
      need(begin === at, `model.safetensors is damaged: ${at === 0 ? "its data does not start" : "a gap comes"} ` +
        `before ${named(name)}`);
      at = end;
      before = name;
    }
    need(at === dataBytes, `model.safetensors is damaged: ${dataBytes - at} bytes after its last tensor`);
    const tensors = new Map();
    for (const [begin, , name, shape, count] of spans) {
      const v = new Float32Array(count);  // read value by value: the data need not be 4-byte aligned
      for (let i = 0; i < count; i++) v[i] = bytes.getFloat32(start + begin + 4 * i, true);
      tensors.set(name, { shape, v });
    }
    return tensors;
  }

  // What the lab's forward pass assumes of a GPT-2 config (model/export.py's gpt2_config writes these).
  const GPT2_SETTINGS = { model_type: "gpt2", activation_function: "gelu", layer_norm_epsilon: 1e-5,
    scale_attn_weights: true };

  // Our weights under GPT-2's names (model/export.py's gpt2_state_dict, read backwards): {ours, theirs, shape: ours,
  // part, of}. of = 0: the tensor as it is; otherwise a Conv1D, stored (in, out), the transpose of nn.Linear's
  // (out, in), its out being `of` of ours stacked (c_attn: W_q, W_k, W_v) and ours part `part` of them.
  function gpt2Names(cfg, hidden) {
    const d = cfg.d_model, rows = [];
    const add = (ours, theirs, shape, part = 0, of = 0) => rows.push({ ours, theirs, shape, part, of });
    const linear = (ours, theirs, nOut, nIn, part = 0, of = 1) => {
      add(`${ours}.weight`, `${theirs}.weight`, [nOut, nIn], part, of);
      add(`${ours}.bias`, `${theirs}.bias`, [nOut], part, of);
    };
    const layerNorm = (ours, theirs) => {
      add(`${ours}.weight`, `${theirs}.weight`, [d]);
      add(`${ours}.bias`, `${theirs}.bias`, [d]);
    };
    add("tok_emb.weight", "transformer.wte.weight", [cfg.vocab_size, d]);
    for (let L = 0; L < cfg.n_layers; L++) {
      const ours = `blocks.${L}`, theirs = `transformer.h.${L}`;
      layerNorm(`${ours}.ln_attn`, `${theirs}.ln_1`);
      ["W_q", "W_k", "W_v"].forEach((W, part) => linear(`${ours}.attn.${W}`, `${theirs}.attn.c_attn`, d, d, part, 3));
      linear(`${ours}.attn.W_o`, `${theirs}.attn.c_proj`, d, d);
      layerNorm(`${ours}.ln_mlp`, `${theirs}.ln_2`);
      linear(`${ours}.mlp.fc_in`, `${theirs}.mlp.c_fc`, hidden, d);
      linear(`${ours}.mlp.fc_out`, `${theirs}.mlp.c_proj`, d, hidden);
    }
    layerNorm("ln_f", "transformer.ln_f");
    if (!cfg.tied) add("lm_head.weight", "lm_head.weight", [cfg.vocab_size, d]);  // tied: tok_emb serves
    return rows;
  }

  function ours(t, { theirs, shape, part, of }) {  // a GPT-2 tensor -> ours, shape `shape`
    const want = !of ? shape : shape.length === 2 ? [shape[1], shape[0] * of] : [shape[0] * of];
    need(t.shape.join("x") === want.join("x"),
      `model.safetensors: ${theirs} is ${t.shape.join("x")}, config.json makes it ${want.join("x")}`);
    if (!of) return t;
    const [nOut, nIn] = shape.length === 2 ? shape : [shape[0], 1], v = new Float32Array(nOut * nIn);
    for (let o = 0; o < nOut; o++) {  // ours (o, i) is theirs (i, part * nOut + o)
      for (let i = 0; i < nIn; i++) v[o * nIn + i] = t.v[i * nOut * of + part * nOut + o];
    }
    return { shape, v };
  }

  function need(ok, message) { if (!ok) throw new Error(message); }

  function within(value, most, what) {  // a declared size: a whole number from 1 to `most`
    need(Number.isSafeInteger(value) && value >= 1,
      `config.json: ${what} is ${cut(JSON.stringify(value) ?? "missing")}, not a size`);
    need(value <= most, `config.json: ${what} is ${value}; the lab runs at most ${most}`);
    return value;
  }

  // config.json -> the model it declares (sizes, format, tensors expected), every size held to LIMITS: nothing is
  // built and no tensor read before this has passed. The vocabulary is fixed (data/tokenizer.py): the page's own,
  // checked against the export's special tokens.
  function exportShape(config, vocab) {
    const t = config.tinycalc;
    need(t && typeof t === "object",
      "config.json has no tinycalc block: not a model written by python calc.py --export hf");
    for (const [key, want] of Object.entries(GPT2_SETTINGS)) {
      need(config[key] === want, `config.json: ${key} is ${cut(JSON.stringify(config[key]) ?? "missing")}; ` +
        `the lab runs ${JSON.stringify(want)} only`);
    }
    need(!config.scale_attn_by_inverse_layer_idx,
      "config.json: scale_attn_by_inverse_layer_idx; the lab runs GPT-2's plain scale only");
    const layers = within(config.n_layer, LIMITS.layers, "n_layer"), H = within(config.n_head, LIMITS.heads, "n_head");
    const d = within(config.n_embd, LIMITS.width, "n_embd");
    const hidden = within(config.n_inner ?? 4 * d, LIMITS.hidden, "n_inner");
    need(d % H === 0, `config.json: n_embd=${d} is not a multiple of n_head=${H}`);
    need(layers * H <= LIMITS.maps, `config.json: ${layers} layers x ${H} heads; the lab draws at most ` +
      `${LIMITS.maps} heads`);
    const special = ["bos_token_id", "eos_token_id", "pad_token_id"].map((k) => config[k]);
    need(config.vocab_size === Object.keys(vocab).length &&
      special.join() === ["[BOS]", "[EOS]", "[PAD]"].map((k) => vocab[k]).join(),
    "config.json: its vocabulary is not tinycalc's (vocab_size or the [BOS] [EOS] [PAD] ids differ)");
    // the format: as data/problems.py's ProblemFormat derives it from what the export records
    const ops = typeof t.operators === "string" && t.operators.length <= 3 ? t.operators : "";
    need(/^[+\-*]+$/.test(ops), "config.json: the tinycalc block's operators are not a format");
    const digits = within(t.digits, LIMITS.digits, "tinycalc.digits");
    within(t.prompt_len, LIMITS.sequence, "tinycalc.prompt_len");
    within(t.answer_len, LIMITS.sequence, "tinycalc.answer_len");
    const widths = { "+": digits + 1, "-": digits, "*": 2 * digits }, signed = ops.includes("-");
    const fmt = { digits, operators: ops, reverse_answer: !!t.reverse_answer, signed,
      answer_len: t.answer_len, result_len: Math.max(...[...ops].map((op) => widths[op])) + (signed ? 1 : 0),
      prompt_len: t.prompt_len, larger_first: t.larger_first === true,  // an older export: any a - b
      b_limit: t.b_limit === undefined ? 0 : within(t.b_limit, digits, "tinycalc.b_limit"), vocab };  // older: any b
    need(fmt.prompt_len === 2 * digits + 3 && fmt.answer_len >= fmt.result_len &&
      (t.show_work || fmt.answer_len === fmt.result_len),
    "config.json: the tinycalc block's lengths do not fit its format");
    const T = fmt.prompt_len + fmt.answer_len;
    need(T <= LIMITS.sequence, `config.json: a problem and its answer are ${T} tokens; the lab runs at most ` +
      `${LIMITS.sequence}`);
    const cfg = { d_model: d, n_heads: H, n_kv_heads: H, n_layers: layers, head_dim: d / H,
      vocab_size: config.vocab_size, bias: true, tied: config.tie_word_embeddings !== false };  // zero biases are exact
    const perLayer = 4 * d + 4 * d * d + 4 * d + 2 * d * hidden + hidden + d;
    const params = (cfg.tied ? 1 : 2) * cfg.vocab_size * d + T * d + layers * perLayer + 2 * d;
    need(fmt.answer_len * T * params <= LIMITS.work, `config.json: writing one answer would take ` +
      `${(fmt.answer_len * T * params).toExponential(1)} multiply-adds; the lab runs at most ${LIMITS.work.toExponential(0)}`);
    return { cfg, fmt, hidden, T };
  }

  // config.json + the tensors (a Map, as readSafetensors reads them) -> the lab's model (as load() makes one).
  function fromExport(config, tensors, vocab) {
    const { cfg, fmt, hidden, T } = exportShape(config, vocab), d = cfg.d_model;
    const w = {}, rows = gpt2Names(cfg, hidden);
    for (const row of rows) {
      need(tensors.has(row.theirs), `model.safetensors has no ${row.theirs}: not the export config.json describes`);
      w[row.ours] = ours(tensors.get(row.theirs), row);
    }
    const placed = new Set([...rows.map((r) => r.theirs), "transformer.wpe.weight", "lm_head.weight"]);  // tied: a copy
    const left = [...tensors.keys()].filter((name) => !placed.has(name));
    need(!left.length, `model.safetensors holds ${named(left[0] ?? "")}, which the model config.json describes ` +
      "has no place for");
    const wpe = tensors.get("transformer.wpe.weight");  // every input position
    need(wpe, "model.safetensors has no transformer.wpe.weight: not the export config.json describes");
    need(wpe.shape.length === 2 && wpe.shape[0] >= T && wpe.shape[1] === d,
      `model.safetensors: transformer.wpe.weight is ${wpe.shape.join("x")}, the format needs at least ${T}x${d}`);
    return { cfg, fmt, w, positions: { shape: [T, d], v: wpe.v.slice(0, T * d) },  // learned positions + places, folded
      scores: Array(cfg.n_layers).fill(null), queryScale: null,  // the export has neither (check_expressible)
      means: null };  // an export carries no heads' means: "mean" is not offered
  }

  // Files chosen or dropped -> the lab's model; an Error of one line for a wrong, partial or oversized set. The
  // config is read and bounded first; model.safetensors is read only if its size is within LIMITS.
  async function openExport(files, vocab) {
    const list = [...files], file = (name) => list.find((f) => f.name === name);
    const configFile = file("config.json"), weights = file("model.safetensors");
    need(configFile && weights,
      "open an export's config.json and model.safetensors together (python calc.py --export hf OUT writes both)");
    need(configFile.size <= LIMITS.configBytes,
      `config.json is ${configFile.size} bytes; an export's is at most ${LIMITS.configBytes}`);
    let config;
    try { config = JSON.parse(await configFile.text()); } catch (e) {
      throw new Error("config.json is not JSON");
    }
    need(config && typeof config === "object" && !Array.isArray(config), "config.json is not a model's config");
    exportShape(config, vocab);  // every declared size bounded before the tensors are read
    need(weights.size <= LIMITS.fileBytes,
      `model.safetensors is ${weights.size} bytes; the lab reads at most ${LIMITS.fileBytes}`);
    return fromExport(config, readSafetensors(await weights.arrayBuffer()), vocab);
  }

  // ---- the lab section: a problem, its answer digit by digit, a switch per head, maps, patching, experiments ----
  const STATES = ["on", "off", "mean"];
  const statesOf = (m) => (m.means ? STATES : ["on", "off"]);  // "mean" needs the heads' means (an export has none)
  const STATE_WORDS = { off: "off: its output zeroed", mean: "at its mean: its output replaced by its average" };

  function el(tag, attrs = {}, ...children) {  // DOM from data: text only, never HTML
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    for (const c of children) node.append(c);
    return node;
  }

  const pct = (x, d = 1) => `${(100 * x).toFixed(d)}%`;
  const counted = (n, thing) => `${n} ${thing}${n === 1 ? "" : "s"}`;  // "1 head", "4 heads"
  const points = (x) => `${(100 * Math.abs(x)).toFixed(1)} points`;

  // Places, as data/positions.py names them: r0 is the result's units, r1 its tens, ...; a2 is a's hundreds.
  const PLACE_NAMES = ["units", "tens", "hundreds", "thousands", "ten thousands", "hundred thousands", "millions"];
  const placeName = (k) => PLACE_NAMES[k] ?? `10^${k}`;

  // Every input position's short name (data/positions.py's Position.short), [BOS] to the answer's last token.
  function positionsOf(fmt) {
    const d = fmt.digits, digits = fmt.result_len - (fmt.signed ? 1 : 0);
    const operand = (kind) => Array.from({ length: d }, (_, i) => `${kind}${d - 1 - i}`);
    const places = Array.from({ length: digits }, (_, k) => k);
    if (!fmt.reverse_answer) places.reverse();  // in the order they are written
    const answer = places.map((k) => `r${k}`);
    if (fmt.signed) { if (fmt.reverse_answer) answer.push("±"); else answer.unshift("±"); }
    const work = [], lines = (fmt.answer_len - fmt.result_len) / (digits + 1);
    for (let line = 0; line < lines; line++) work.push(...places.map((k) => `w${line}.${k}`), "|");
    return ["^", ...operand("a"), "op", ...operand("b"), "=", ...work, ...answer];
  }

  function describe(short) {  // "r1" -> "tens digit (r1)", "a0" -> "a's units (a0)"
    const digit = /^([abr])(\d+)$/.exec(short);
    if (!digit) return { "^": "[BOS]", op: "the operator", "=": "=", "±": "the sign", "|": "a working separator" }[short]
      ?? `working digit ${short}`;
    const name = placeName(Number(digit[2]));
    return digit[1] === "r" ? `the ${name} digit (${short})` : `${digit[1]}'s ${name} (${short})`;
  }

  function orderLine(fmt) {  // one line: the order the model writes in, and why
    const written = positionsOf(fmt).slice(-fmt.result_len).filter((s) => s !== "±");
    if (!fmt.reverse_answer) return `The model writes the answer as you read it, ${describe(written[0])} first.`;
    return `The model writes the units first (${written[0]}${written.length > 1 ? `, then ${written.slice(1).join(", ")}` : ""}` +
      "), and the page shows the answer as you read it: a carry moves up from the units, so the model writes each " +
      "digit after the ones below it, whose carries it needs.";
  }

  // Attention weight 0 to 1 as viridis (matplotlib's, as the run's PNG maps and the report's own maps draw it):
  // one colour scale across the page.
  const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
                   [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
  function viridis(t) {
    t = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i;
    const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]];
    return [0, 1, 2].map((c) => Math.round(a[c] + f * (b[c] - a[c])));
  }

  function colourScale() {
    const canvas = el("canvas", { width: 160, height: 10, class: "lab-scale" });
    const ctx = canvas.getContext("2d");
    for (let x = 0; x < 160; x++) { ctx.fillStyle = `rgb(${viridis(x / 159).join(",")})`; ctx.fillRect(x, 0, 1, 10); }
    return el("span", { class: "lab-scale-key" }, "attention weight 0 ", canvas, " 1");
  }

  // One head's T x T attention maps (``shown``: [caption, pattern, tokens], every head on first when heads are
  // switched), the tokens' places on both axes (rows read, columns are read from), the weight under the pointer in
  // `readout`, and a head that is off or at its mean marked.
  function headMaps(label, how, names, shown, readout) {
    const T = names.length, cell = Math.max(6, Math.min(16, Math.floor((shown.length > 1 ? 150 : 220) / T)));
    const maps = shown.map(([caption, pattern, tokens], k) => {
      const canvas = el("canvas", { width: T * cell, height: T * cell, class: "lab-map", "data-head": label });
      const ctx = canvas.getContext("2d");
      for (let i = 0; i < T; i++) {
        for (let j = 0; j < T; j++) {
          ctx.fillStyle = j > i ? "#f1f2f5" : `rgb(${viridis(pattern[i][j]).join(",")})`;  // above: not yet written
          ctx.fillRect(j * cell, i * cell, cell, cell);
        }
      }
      if (how !== "on" && k === shown.length - 1) {  // hatched, as switched: its output does not reach the model
        ctx.strokeStyle = how === "off" ? "rgba(179, 38, 30, 0.55)" : "rgba(176, 120, 0, 0.55)";
        for (let x = -T * cell; x < T * cell; x += 8) {
          ctx.beginPath(); ctx.moveTo(x, T * cell); ctx.lineTo(x + T * cell, 0); ctx.stroke();
        }
      }
      const say = (ev) => {
        const box = canvas.getBoundingClientRect();
        const i = Math.floor((ev.clientY - box.top) / (box.height / T)), j = Math.floor((ev.clientX - box.left) / (box.width / T));
        if (i < 0 || j < 0 || i >= T || j >= T || j > i) { readout.textContent = ""; return; }
        readout.textContent = `${label}${caption ? ` (${caption})` : ""}: query ${tokens[i]} (${names[i]}) reads key ` +
          `${tokens[j]} (${names[j]}) with weight ${pattern[i][j].toFixed(4)}`;
      };
      canvas.addEventListener("mousemove", say);
      canvas.addEventListener("mouseleave", () => { readout.textContent = ""; });
      const axis = (cls, size) => el("div", { class: cls }, ...names.map((name, i) => el("span",
        { style: `${size}:${cell}px`, title: `${tokens[i]}: ${describe(name)}` }, name)));
      return el("div", { class: "lab-map-one" }, caption ? el("div", { class: "muted" }, caption) : "",
        el("div", { class: "lab-map-grid" }, axis("lab-rows", "height"), canvas, el("span"), axis("lab-cols", "width")));
    });
    const caption = el("figcaption", {}, el("b", {}, label), how === "on" ? "" : ` ${STATE_WORDS[how]}`);
    return el("figure", { class: `lab-figure lab-${how}`, "data-head": label, "data-state": how },
      el("div", { class: "lab-map-pair" }, ...maps), caption);
  }

  function readState(m, fromUrl) {
    const state = { problem: defaultProblem(m), corrupted: "", switches: {}, notice: "" };
    if (!fromUrl) return state;
    if (location.hash.length > LIMITS.linkChars) {  // before it is parsed: a link is read only when it is short
      state.notice = `this link's experiment is ${location.hash.length.toLocaleString("en-US")} characters long; ` +
        `the lab reads links of at most ${LIMITS.linkChars.toLocaleString("en-US")}, so it starts from its own problem`;
      return state;
    }
    const hash = new URLSearchParams(location.hash.slice(1));  // "#attention" and the like are the page's anchors
    if (!hash.has("problem")) return state;
    state.problem = hash.get("problem");
    if (hash.has("corrupted")) state.corrupted = hash.get("corrupted");
    for (const pair of (hash.get("heads") || "").split(",").filter(Boolean)) {
      const [label, how] = pair.split(":");
      if (/^L\d+h\d+$/.test(label) && statesOf(m).includes(how)) state.switches[label] = how;
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

  // The logit difference at the first answer token where the clean and corrupted answers differ, and each head's
  // share of it restored when its clean output is patched into the corrupted run.
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
    const names = Object.fromEntries(Object.entries(m.fmt.vocab).map(([t, i]) => [i, t]));
    return { place: positionsOf(m.fmt)[at], right: names[right], wrong: names[wrong], ldClean, ldCorrupted, rows };
  }

  function truthOf(p) { return p.op === "+" ? p.a + p.b : p.op === "-" ? p.a - p.b : p.a * p.b; }

  // The answer as read: the result's digits most significant first, each named by its place, with its probability;
  // runs: [[title, decode], ...] (the clean answer, then the one with heads switched), a digit that changed marked.
  function answerTable(m, runs) {
    const f = m.fmt, names = positionsOf(f).slice(f.prompt_len), start = f.answer_len - f.result_len;
    const order = Array.from({ length: f.result_len }, (_, i) => start + i);  // the result, as written
    if (f.reverse_answer) order.reverse();  // as read: the sign, then the most significant digit first
    const head = el("tr", {}, el("th", {}, ""), ...order.map((i) => el("th", { class: "lab-place", "data-place": names[i] },
      names[i] === "±" ? "sign" : placeName(Number(names[i].slice(1))), el("br"), el("span", { class: "muted" }, names[i]))));
    const rows = runs.map(([title, run], n) => el("tr", { class: n ? "lab-changed-run" : "lab-clean-run" },
      el("th", {}, title), ...order.map((i) => {
        const s = run.steps[i], changed = n && s.token !== runs[0][1].steps[i].token;
        return el("td", { class: changed ? "lab-digit lab-changed" : "lab-digit", "data-place": names[i],
          title: `runner-up ${s.second}: ${pct(s.p2)}` }, el("b", {}, s.token), el("br"), pct(s.p));
      })));
    const table = el("table", { class: "lab-digits" }, el("thead", {}, head), el("tbody", {}, ...rows));
    if (!start) return [table];
    const work = runs.map(([title, run]) => `${title}: ${run.steps.slice(0, start).map((s) => s.token).join("")}`);
    return [table, el("p", { class: "muted" }, `the working it writes first: ${work.join("; ")}`)];
  }

  // ---- guided experiments: the run's own choices (analysis/lab.py's guided_experiments), told in the page's
  // words with the numbers the model computes here and the test set's from the run's results -----------------
  const verdict = (problem, run) => (run.answer === truthOf(problem) ? "right" : "wrong");

  function experimentSays(m, x, choice) {
    const p = encodeProblem(m, x.problem), t = x.test;
    const clean = decode(m, p.ids), cleanRight = verdict(p, clean) === "right";
    const said = (run) => `${run.answer ?? "?"} (${verdict(p, run)})`;
    const changedDigits = (run) => positionsOf(m.fmt).slice(m.fmt.prompt_len)
      .map((short, i) => [short, clean.steps[i].token, run.steps[i].token]).filter(([, a, b]) => a !== b)
      .map(([short, a, b]) => `${describe(short)} ${a} to ${b}`);
    const against = (em) => (!cleanRight ? "the model gets this problem wrong even with every head on"
      : em.right ? `this problem is among the ${pct(em.share)} still right`
        : `this problem is one of those it breaks (${points(t.intact - em.share)} of the test set)`);
    if (x.kind === "off" || x.kind === "carry") {
      const run = decode(m, p.ids, x.heads), right = verdict(p, run) === "right";
      const digits = changedDigits(run);
      let text = `With ${x.head} off the model answers ${x.problem} with ${said(run)}; with every head on, ` +
        `${said(clean)}. ${digits.length ? `Changed: ${digits.join(", ")}.` : "No digit changed."} You said ` +
        `${choice}: ${choice === (right ? "right" : "wrong") ? "so it was" : "not this time"}. On the test set ` +
        `(${t.n.toLocaleString("en-US")} problems, this run's results), zeroing ${x.head} leaves ${pct(t.zero)} right ` +
        `against ${pct(t.intact)} (${points(t.intact - t.zero)}): ${against({ right, share: t.zero })}.`;
      if (x.kind === "carry") {
        text += ` On the run's patching pairs, ${x.head} restores ` + Object.entries(t.restored)
          .map(([digit, share]) => `${pct(share, 0)} of ${digit}`).join(", ") + ".";
      }
      return text;
    }
    if (x.kind === "mean") {
      const zero = decode(m, p.ids, { [x.head]: "off" }), mean = decode(m, p.ids, { [x.head]: "mean" });
      const zr = verdict(p, zero) === "right", mr = verdict(p, mean) === "right";
      const actual = !zr && !mr ? "both" : !zr ? "zero breaks it" : !mr ? "its mean breaks it" : "neither";
      return `Zeroed, ${x.head} makes ${x.problem} ${said(zero)}; at its mean, ${said(mean)}; with every head on, ` +
        `${said(clean)}. You said ${choice}: ${choice === actual ? "so it was" : `it was ${actual}`}. On the test set ` +
        `(${t.n.toLocaleString("en-US")} problems), zeroing it leaves ${pct(t.zero)} right (${points(t.intact - t.zero)} ` +
        `lost) and its mean ${pct(t.mean)} (${points(t.intact - t.mean)} lost): zeroed, ${against({ right: zr,
          share: t.zero })}; at its mean, ${against({ right: mr, share: t.mean })}.`;
    }
    const q = encodeProblem(m, x.corrupted), result = patching(m, p, q, {});  // x.kind === "patch"
    if (!result) return `The model gives ${x.problem} and ${x.corrupted} the same answer: nothing to patch.`;
    const best = result.rows.reduce((u, v) => (v[1] > u[1] ? v : u)), mine = result.rows.find(([h]) => h === choice);
    const average = t.restored[result.place] || {}, top = Object.entries(average).reduce((u, v) => (v[1] > u[1] ? v : u),
      ["", -Infinity]);
    return `At ${describe(result.place)} the first problem writes ${result.right}, the second ${result.wrong}; this ` +
      "pair differs by its carry alone, while the run's pairs mix carries with changes to a digit's own sum. " +
      `Patching ${best[0]} restores ${pct(best[1])} of the logit difference, the most of any head` +
      (mine && mine[0] !== best[0] ? `; ${mine[0]}, your pick, ${pct(mine[1])}.` : `: your pick.`) +
      (top[0] ? ` On the run's patching pairs for ${result.place} (the test set), ${top[0]} restores the most on ` +
        `average, ${pct(top[1])}${top[0] === best[0] ? ", as here" : `; ${best[0]} restores ${pct(average[best[0]] ?? 0)}`}.`
        : "");
  }

  // The lab in `container`, running `m`. opened: how an export dropped on the page was read (then the URL's
  // experiment, made for the page's own model, is not restored), or absent for the page's own model.
  function render(container, m, opened = null) {
    const started = performance.now();
    container.replaceChildren(labBody(container, m, opened));
    shown.set(container, m);
    container.dataset.renderMs = (performance.now() - started).toFixed(1);  // the link read, the first answer drawn
  }

  // The lab's whole body for `m`, its first answer computed: an opened export's failure throws (the caller keeps
  // the lab it has); the page's own model shows what went wrong in one line.
  function labBody(container, m, opened) {
    const body = el("div", { class: "lab-body" });
    const state = readState(m, !opened);
    const input = el("input", { type: "text", class: "lab-problem", value: state.problem, "aria-label": "problem",
      maxlength: String(LIMITS.problemChars) });
    const other = el("input", { type: "text", class: "lab-corrupted", value: state.corrupted,
      "aria-label": "second problem", maxlength: String(LIMITS.problemChars) });
    const reset = el("button", { type: "button", class: "lab-reset" }, "reset");
    const answer = el("div", { class: "lab-answer" }), heads = el("div", { class: "lab-heads" });
    const readout = el("p", { class: "lab-readout", "aria-live": "polite" });
    const maps = el("div", { class: "lab-maps" }), patched = el("div", { class: "lab-patching" });
    const guided = el("div", { class: "lab-guided" });
    body.append(
      el("div", { class: "lab-inputs" }, el("label", {}, "Problem ", input), " ", reset),
      ...(longer(m) ? [el("p", { class: "muted lab-longer" }, `Longer problems: ${longer(m)}.`)] : []),
      guided, answer,
      el("h3", {}, "Heads"), el("p", { class: "muted" }, "Click a head to switch it " +
        `${statesOf(m).slice(1).join(", then ")}, then on again.`), heads,
      el("h3", {}, "What each head reads"), el("p", { class: "muted lab-maps-key" }, "Rows: the token reading (query); " +
        "columns: the token read (key). Point at a square for its weight. ", colourScale()), readout, maps,
      el("h3", {}, "Patching"), el("div", { class: "lab-inputs" }, el("label", {},
        "Second problem, to patch each head from the first into it ", other)), patched,
      openRow(container, m, opened));
    if (state.notice) answer.append(el("p", { class: "lab-error" }, `error: ${state.notice}`));

    function update(byUser = true) {  // the state goes into the URL once the learner changes something
      try { draw(byUser); } catch (e) {  // a model that cannot run this problem: one line, the lab stays
        maps.replaceChildren();
        patched.replaceChildren();
        answer.replaceChildren(el("p", { class: "lab-error" }, `error: ${oneLine(e)}`));
        if (opened && !byUser && !body.isConnected) throw e;  // an export's first answer: the open fails
      }
    }

    function draw(byUser) {
      const started = performance.now();
      state.problem = input.value;
      state.corrupted = other.value;
      if (byUser) writeState(state);
      answer.replaceChildren();
      maps.replaceChildren();
      patched.replaceChildren();
      readout.textContent = "";
      const clean = encodeProblem(m, state.problem);
      if (clean.error) { answer.append(el("p", { class: "lab-error" }, `error: ${clean.error}`)); return; }
      const truth = truthOf(clean), switched = Object.entries(state.switches).filter(([, v]) => v !== "on");
      const intact = decode(m, clean.ids), run = switched.length ? decode(m, clean.ids, state.switches) : intact;
      const mark = (r) => (r.answer === truth ? "right" : `wrong: ${truth}`);
      const title = switched.map(([k, v]) => `${k} ${v}`).join(", ");
      answer.append(el("p", {}, el("b", { class: "lab-result" }, `${run.answer ?? "?"}`), ` (${mark(run)})`,
        switched.length ? el("span", { class: "lab-clean" }, ` with ${title}; with every head on: `,
          el("b", { class: "lab-clean-result" }, `${intact.answer ?? "?"}`), ` (${mark(intact)})`) : ""));
      answer.append(...answerTable(m, switched.length ? [["every head on", intact], [title, run]] : [["answer", intact]]),
        el("p", { class: "muted lab-order" }, orderLine(m.fmt) + " Under each digit: the model's probability for it " +
          "(point at it for the runner-up)."));
      // one more pass over the whole problem, its answer written: every answer token reads and is read in the maps;
      // with heads switched, each head's map with every head on beside the one as switched
      const tokens = run.ids.map((id) => tokenText(m, id)), names = positionsOf(m.fmt).slice(0, tokens.length);
      const seen = forward(m, run.ids, state.switches).patterns;
      const before = switched.length ? forward(m, intact.ids, {}).patterns : null;
      const beforeTokens = intact.ids.map((id) => tokenText(m, id));
      seen.forEach((layer, L) => layer.forEach((pattern, h) => {
        const label = `L${L}h${h}`, how = state.switches[label] || "on";
        const shown = [[switched.length ? `with ${title}` : "", pattern, tokens]];
        if (before) shown.unshift(["every head on", before[L][h], beforeTokens]);
        maps.append(headMaps(label, how, names, shown, readout));
      }));
      const corrupted = state.corrupted ? encodeProblem(m, state.corrupted) : null;
      if (corrupted && corrupted.error) patched.append(el("p", { class: "lab-error" }, `error: ${corrupted.error}`));
      else if (corrupted) patchingView(patched, patching(m, clean, corrupted, state.switches));
      else patched.append(el("p", { class: "muted" }, "Type a second problem: each head's output on the first is " +
        "put into the model's run on the second, one head at a time, to see which heads carry the difference."));
      container.dataset.ms = (performance.now() - started).toFixed(1);  // python bench.py lab reads it
    }

    const switches = [];
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
          const states = statesOf(m), now = states.indexOf(state.switches[label] || "on");
          state.switches[label] = states[(now + 1) % states.length];
          show();
          update();
        });
        show();
        switches.push(show);
        row.append(button, " ");
      }
      heads.append(row);
    }
    function set(problem, corrupted, heads) {  // what reset and an experiment do
      state.switches = { ...heads };
      input.value = problem;
      other.value = corrupted;
      switches.forEach((show) => show());
      update();
    }
    input.addEventListener("input", update);
    other.addEventListener("input", update);
    reset.addEventListener("click", () => set(defaultProblem(m), "", {}));
    guidedView(guided, m, set);
    const notice = [...answer.childNodes];
    update(false);
    answer.prepend(...notice);
    return body;
  }

  function tokenText(m, id) {
    const t = Object.keys(m.fmt.vocab).find((k) => m.fmt.vocab[k] === id);
    return t === "[BOS]" ? "^" : t;
  }

  function patchingView(box, p) {
    if (!p) { box.append(el("p", {}, "the two problems get the same answer: nothing to patch")); return; }
    box.append(
      el("p", {}, `The answers first differ at ${describe(p.place)}: the first problem writes ${p.right}, the second ` +
        `${p.wrong}.`),
      el("p", {}, `Logit difference: the model's score for ${p.right} minus its score for ${p.wrong} at that digit ` +
        `(above 0 it prefers ${p.right}). It is ${p.ldClean.toFixed(2)} on the first problem and ` +
        `${p.ldCorrupted.toFixed(2)} on the second.`),
      el("p", {}, "Each head's output on the first problem, put into the run on the second, restores this share of " +
        "the gap between them (100%: all of it):"));
    const table = el("table", { class: "lab-patch-table" });
    for (const [label, share] of p.rows) {
      const width = Math.max(0, Math.min(1, Math.abs(share))) * 100;
      table.append(el("tr", { "data-head": label }, el("td", {}, label), el("td", { class: "num" }, pct(share)),
        el("td", { class: "lab-bar-cell" }, el("span", { class: share < 0 ? "lab-bar lab-bar-negative" : "lab-bar",
          style: `width:${width.toFixed(1)}%` }))));
    }
    box.append(table);
  }

  function guidedView(box, m, set) {
    const experiments = m.experiments || [];
    if (!experiments.length) return;
    const question = el("div", { class: "lab-question" });
    const buttons = experiments.map((x) => {
      const button = el("button", { type: "button", class: "lab-experiment", "data-kind": x.kind }, x.title);
      button.addEventListener("click", () => {  // the question first, every head on: the answer waits for a pick
        set(x.problem, "", {});
        const said = el("p", { class: "lab-said" });
        const choices = x.choices.map((c) => {
          const pick = el("button", { type: "button", class: "lab-choice" }, c);
          pick.addEventListener("click", () => {
            set(x.problem, x.corrupted || "", x.heads);
            said.textContent = experimentSays(m, x, c);
          });
          return pick;
        });
        question.replaceChildren(el("p", { class: "lab-ask" }, x.question), el("div", {}, ...choices), said);
      });
      return button;
    });
    box.append(el("h3", {}, "Guided experiments"), el("div", { class: "lab-experiments" }, ...buttons), question);
  }

  // Another model in the lab: the files of a Hugging Face export, chosen or dropped on the lab. The one it runs
  // stays until a whole export has been read; a wrong or partial set is one line.
  const shown = new WeakMap();  // container -> the model its lab runs
  const modelIn = (container) => shown.get(container);

  const oneLine = (e) => {  // an Error as one short line
    const line = String((e && e.message) || e).split("\n")[0];
    return line.length > 300 ? `${line.slice(0, 300)}...` : line;
  };

  function openRow(container, m, opened) {
    const choose = el("input", { type: "file", multiple: "", accept: ".json,.safetensors", class: "lab-open",
      "aria-label": "an export's config.json and model.safetensors" });
    const said = el("p", { class: "lab-opened" }, opened || "");
    if (opened && !m.means) said.append(" Mean ablation is off for it: an export carries no heads' means.");
    async function open(files) {
      try {
        const next = await openExport(files, m.fmt.vocab);
        const f = next.fmt, c = next.cfg, what = `${f.digits}-digit ${f.operators}, ${counted(c.n_layers, "layer")} x ${counted(c.n_heads, "head")}`;
        const body = labBody(container, next, `Opened config.json + model.safetensors: ${what}.`);  // built whole ...
        container.replaceChildren(body);  // ... before it replaces the lab that runs now
        shown.set(container, next);
      } catch (e) {
        said.replaceChildren(el("span", { class: "lab-error" }, `error: ${oneLine(e)}`));
      }
    }
    choose.addEventListener("change", () => open(choose.files));
    container.ondragover = (e) => e.preventDefault();  // one handler each, however often the lab is drawn again
    container.ondrop = (e) => { e.preventDefault(); open(e.dataTransfer.files); };
    return el("div", { class: "lab-open-row" }, el("h3", {}, "Another model"),
      el("label", {}, "Drop a Hugging Face export's config.json and model.safetensors (python calc.py --export hf " +
        "OUT) on the lab, or choose them: ", choose), said);
  }

  return { LIMITS, load, forward, encodeProblem, decode, answerOf, softmax, render, readSafetensors, fromExport,
    openExport, modelIn, positionsOf, placeName, patching, viridis, counted };
})();
