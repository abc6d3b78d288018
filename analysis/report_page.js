// Renders a tinycalc report (analysis/html_report.py) from the JSON inlined in the page: no network, no libraries.
"use strict";
(function () {
  const started = performance.now();
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const root = document.getElementById("report");
  const SVG = "http://www.w3.org/2000/svg";
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf"];
  const viridis = TinycalcLab.viridis;  // the lab's colour scale (analysis/lab.js): one across the page

  // ---- small helpers ----------------------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "href" && !/^(#|\.\/)/.test(v)) continue;  // links stay on the page or beside it: no scheme
      if (k === "text") node.textContent = v;
      else if (k === "style" && typeof v === "object") Object.assign(node.style, v);
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined && child !== false) {
        node.append(child instanceof Node ? child : String(child));
      }
    }
    return node;
  }
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) node.setAttribute(k, v);
    for (const child of children.flat()) if (child) node.append(child instanceof Node ? child : String(child));
    return node;
  }
  const isNum = (x) => typeof x === "number" && isFinite(x);
  const pct = (x, d = 2) => (isNum(x) ? (100 * x).toFixed(d) + "%" : "—");
  const points = (x, d = 1) => (isNum(x) ? (x >= 0 ? "+" : "−") + Math.abs(100 * x).toFixed(d) : "—");
  const num = (x) => (isNum(x) ? x.toLocaleString("en-US") : "—");
  const counted = TinycalcLab.counted;  // "1 head", "4 heads"
  const fixed = (x, d) => (isNum(x) ? x.toFixed(d) : "—");

  // white at 0, deep red at -1 (an ablation that costs every answer); gains are pale green
  function lossColour(delta) {
    if (!isNum(delta)) return "#fff";
    const t = Math.min(1, Math.abs(delta));
    const [r, g, b] = delta < 0 ? [255 - 76 * t, 255 - 217 * t, 255 - 225 * t] : [255 - 60 * t, 255 - 20 * t, 255 - 60 * t];
    return `rgb(${r | 0},${g | 0},${b | 0})`;
  }

  function section(id, title, intro) {
    const node = el("section", { id }, el("h2", { text: title }), intro ? el("p", { class: "intro" }, intro) : null);
    root.append(node);
    return node;
  }
  function table(columns, rows, opts = {}) {
    const head = el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null, text: c.label })));
    const body = rows.map((row) => el("tr", { class: opts.rowClass ? opts.rowClass(row) : null },
      columns.map((c) => {
        const value = c.get(row);
        return el("td", { class: c.num ? "num" : (c.mono ? "mono" : null) }, value instanceof Node ? value : String(value));
      })));
    return el("table", { class: opts.class || null }, el("thead", {}, head), el("tbody", {}, body));
  }
  function card(value, label) {
    return el("div", { class: "card" }, el("div", { class: "value", text: value }), el("div", { class: "label", text: label }));
  }

  // ---- line charts (SVG) ------------------------------------------------------------------------------------
  function niceTicks(lo, hi, n) {
    const span = hi - lo || 1, raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(+t.toPrecision(12));
    return ticks;
  }
  function logTicks(lo, hi) {
    const ticks = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of hi / lo > 300 ? [1] : [1, 2, 5]) {
        const t = m * Math.pow(10, e);
        if (t >= lo * 0.999 && t <= hi * 1.001) ticks.push(t);
      }
    }
    return ticks;
  }
  // series: [{label, colour, points: [[x, y, title]], dash}]; opts: x/yLabel, x/yDomain, log, hlines, vlines
  function lineChart(series, opts) {
    const W = opts.width || 520, H = opts.height || 280, m = { l: 56, r: 16, t: 14, b: 42 };
    const all = series.flatMap((s) => s.points).filter((p) => isNum(p[0]) && isNum(p[1]) && (!opts.log || p[1] > 0));
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
    let [x0, x1] = opts.xDomain || [Math.min(...xs, 0), Math.max(...xs, 1)];
    let [y0, y1] = opts.yDomain || [Math.min(...ys), Math.max(...ys)];
    if (opts.log) { y0 = y0 / 1.3; y1 = y1 * 1.3; } else if (!opts.yDomain) { const pad = (y1 - y0) * 0.06 || 1; y0 -= pad; y1 += pad; }
    if (x1 === x0) x1 = x0 + 1;
    const fy = opts.log ? (y) => Math.log10(y) : (y) => y;
    const X = (x) => m.l + ((x - x0) / (x1 - x0)) * (W - m.l - m.r);
    const Y = (y) => H - m.b - ((fy(y) - fy(y0)) / (fy(y1) - fy(y0) || 1)) * (H - m.t - m.b);
    const chart = svg("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
                               "aria-label": opts.title || "" });
    const grid = svg("g", { class: "grid" }), axis = svg("g", { class: "axis" });
    const yTicks = opts.log ? logTicks(y0, y1) : niceTicks(y0, y1, 5);
    for (const t of yTicks) {
      grid.append(svg("line", { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t) }));
      axis.append(svg("text", { x: m.l - 6, y: Y(t) + 4, "text-anchor": "end" }, opts.yFormat ? opts.yFormat(t) : String(t)));
    }
    for (const t of niceTicks(x0, x1, 6)) {
      axis.append(svg("line", { x1: X(t), x2: X(t), y1: H - m.b, y2: H - m.b + 4 }));
      axis.append(svg("text", { x: X(t), y: H - m.b + 16, "text-anchor": "middle" }, opts.xFormat ? opts.xFormat(t) : String(t)));
    }
    axis.append(svg("path", { d: `M${m.l},${m.t}V${H - m.b}H${W - m.r}`, fill: "none" }));
    axis.append(svg("text", { x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle" }, opts.xLabel || ""));
    axis.append(svg("text", { transform: `translate(14,${(m.t + H - m.b) / 2}) rotate(-90)`, "text-anchor": "middle" },
                    opts.yLabel || ""));
    chart.append(grid, axis);
    for (const line of opts.hlines || []) {
      if (!isNum(line.y) || line.y < y0 || line.y > y1) continue;
      chart.append(svg("line", { x1: m.l, x2: W - m.r, y1: Y(line.y), y2: Y(line.y), stroke: line.colour || "#888",
                                 "stroke-dasharray": "5 4" }),
                   svg("text", { x: m.l + 6, y: Y(line.y) + (line.below ? 13 : -5), fill: line.colour || "#666" }, line.label));
    }
    for (const line of opts.vlines || []) {
      if (!isNum(line.x)) continue;
      const right = X(line.x) > (m.l + W - m.r) / 2;
      chart.append(svg("line", { x1: X(line.x), x2: X(line.x), y1: m.t, y2: H - m.b, stroke: line.colour || "#888",
                                 "stroke-dasharray": "2 3" }),
                   svg("text", { x: X(line.x) + (right ? -4 : 4), y: line.bottom ? H - m.b - 8 : m.t + 10,
                                 "text-anchor": right ? "end" : "start", fill: line.colour || "#666" }, line.label));
    }
    for (const s of series) {
      const pts = s.points.filter((p) => isNum(p[0]) && isNum(p[1]) && (!opts.log || p[1] > 0));
      if (!pts.length) continue;
      chart.append(svg("path", { d: pts.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(""),
                                 fill: "none", stroke: s.colour, "stroke-width": 2, "stroke-dasharray": s.dash || null,
                                 class: "series" }));
      for (const p of pts) {
        chart.append(svg("circle", { cx: X(p[0]), cy: Y(p[1]), r: pts.length > 60 ? 1.5 : 2.6, fill: s.colour },
                         svg("title", {}, p[2] || `${s.label ? s.label + ": " : ""}${p[0]}, ${p[1]}`)));
        if (p[3]) chart.append(svg("text", { x: X(p[0]), y: Y(p[1]) - 8, "text-anchor": "middle", "font-size": 10 }, p[3]));
      }
    }
    return chart;
  }
  function legend(series) {
    return el("div", { class: "legend" }, series.map((s) => el("span", { style: `--c:${s.colour}`, text: s.label })));
  }

  // ---- run page ---------------------------------------------------------------------------------------------
  function taskText(r) {
    const d = r.data;
    if (!d) return "—";
    return `${d.digits}-digit '${d.operators}', answer ${d.reverse_answer ? "reversed (least significant digit first)" : "plain"}`;
  }

  function header(title, ok, statusText) {
    root.append(el("h1", {}, title, " ", el("span", { class: ok ? "badge" : "badge bad", text: statusText })));
  }

  function summarySection(d) {
    const r = d.results, m = d.mistakes;
    const cards = el("div", { class: "cards", id: "summary" },
      card(pct(r.test_exact_match), `test exact-match (${num(r.n_test)} held-out problems)`),
      card(pct(r.test_digit_accuracy), "test per-digit accuracy"),
      card(m ? num(m.n_mistakes) : "—", m ? "test mistakes" : "test mistakes: not recorded"),
      card(num(r.n_params), `parameters (${counted(r.n_layers, "layer")} × ${counted(r.n_heads, "head")} of ${r.head_dim} dims)`),
      card(`${num(r.steps)} steps`, `training, ${fixed(r.train_seconds, 1)} s (${num(r.tokens_per_second)} tokens/s)`),
      r.learned === false ? card("not learned", `below ${pct(r.learned_threshold, 0)} test exact-match: no pruning or role claims`)
        : card(isNum(r.prunable_fraction) ? pct(r.prunable_fraction, 0) : "—", `of heads prunable losing ≤ ${d.tolerance_text}`));
    root.append(cards);
  }

  function configSection(d) {
    const r = d.results, s = section("config", "Task and configuration");
    const rows = [
      ["task", taskText(r)],
      ["model", `${counted(r.n_layers, "layer")} × ${counted(r.n_heads, "head")} of ${r.head_dim} dims (d_model ${r.d_model}` +
                (r.n_kv_heads && r.n_kv_heads !== r.n_heads ? `, ${r.n_kv_heads} key/value heads` : "") + `), ${num(r.n_params)} parameters`],
      ["training", `${num(r.steps)} steps, ${fixed(r.train_seconds, 1)} s, seed ${r.seed}` + (r.processes > 1 ? `, ${r.processes} processes` : "")],
      ["best val exact-match", pct(r.val_exact_match)],
      ["test loss", fixed(r.test_loss, 4)],
      ["head analysis", isNum(r.analysis_problems) ? `on ${num(r.analysis_problems)} test problems, ${r.analysis_seconds ?? "—"} s` : "not run"],
      ["run directory", r.run_dir || d.name],
    ];
    s.append(el("table", { class: "kv" }, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: v, class: /\S{30,}/.test(String(v)) ? "long" : null }))))));  // a path breaks anywhere
    if (d.config) s.append(el("details", {}, el("summary", { text: "the full resolved config (config.yaml)" }), el("pre", { text: d.config })));
  }

  function curvesSection(d) {
    const s = section("curves", "Learning curves",
      "Validation exact-match and loss at every validation. Flat stretches are the plateaus: the loss creeps down while " +
      "few whole answers are right, until a new digit (or the carry) clicks.");
    const h = d.history;
    if (!h.length) { s.append(el("p", { class: "muted", text: "No validation history recorded (history.json missing or empty)." })); return; }
    const best = h.reduce((a, b) => (b.exact_match > a.exact_match ? b : a));
    const em = lineChart([{ label: "val exact-match", colour: PALETTE[0],
                            points: h.map((e) => [e.step, 100 * e.exact_match, `step ${e.step}: ${pct(e.exact_match)}`]) }],
      { xLabel: "training step", yLabel: "val exact-match (%)", yDomain: [-2, 102], title: "val exact-match",
        hlines: [{ y: 100 * d.milestone, label: pct(d.milestone, 0) }], vlines: [{ x: best.step, label: `best, step ${best.step}`, colour: "#1f7a3d", bottom: true }] });
    const loss = lineChart([{ label: "val loss", colour: PALETTE[1],
                              points: h.map((e) => [e.step, e.loss, `step ${e.step}: loss ${fixed(e.loss, 4)}`]) }],
      { xLabel: "training step", yLabel: "val loss (log scale)", log: true, title: "val loss", yFormat: (t) => String(+t.toPrecision(2)) });
    s.append(el("div", { class: "row" }, el("div", {}, el("h3", { text: "val exact-match" }), em),
                el("div", {}, el("h3", { text: "val loss" }), loss)));
  }

  function attentionSection(d) {
    const s = section("attention", "Attention, head by head",
      "Each small map is one head: rows are queries (the token being read from), columns are keys (the token attended to); " +
      "a bright cell means that query puts that much of its attention on that key. Pick a problem and a head; " +
      "flip through heads with ← →, through problems with ↑ ↓.");
    const snaps = d.attention;
    if (!snaps.length) { s.append(el("p", { class: "muted", text: "Not recorded (no attention/*.json in the run directory)." })); return; }
    const notes = {};  // "L0h1" -> [[analysis title, its line for that head], ...]
    const stories = {};  // "L0h1" -> the one sentence that reconciles those lines (an analysis whose facts say headline)
    for (const a of d.analyses) for (const [key, note] of Object.entries(a.notes || {})) {
      if (!note) continue;
      if (a.headline) stories[key] = note; else (notes[key] = notes[key] || []).push([a.title, note]);
    }
    const noteText = (key) => (notes[key] || []).map(([, note]) => note).join(" · ");
    const nLayers = snaps[0].weights.length, nHeads = snaps[0].weights[0][0].length;
    const state = { snap: snaps.length - 1, probe: 0, layer: 0, head: 0 };

    const controls = el("div", { class: "controls" });
    const snapGroup = el("div", { class: "group" }, el("b", { text: "when" }));
    const probeGroup = el("div", { class: "group" }, el("b", { text: "problem" }));
    const headGroup = el("div", { class: "group" },
      el("button", { text: "◀ head", onclick: () => step(-1) }), el("button", { text: "head ▶", onclick: () => step(1) }));
    controls.append(probeGroup, snapGroup, headGroup);
    const snapButtons = snaps.map((snap, i) => el("button", { text: snap.step === null || snap.tag === "final" ? "end of training" : `step ${snap.step}`,
                                                              onclick: () => { state.snap = i; update(); } }));
    if (snaps.length > 1) snapGroup.append(...snapButtons); else snapGroup.append(el("span", { class: "muted", text: "end of training" }));
    const probeButtons = snaps[0].probes.map((p, i) => el("button", { class: "mono", text: p, onclick: () => { state.probe = i; update(); } }));
    probeGroup.append(...probeButtons);

    const grid = el("div", { class: "heads", style: { gridTemplateColumns: `auto repeat(${nHeads}, minmax(0, 116px))` } });
    const thumbs = [];
    for (let layer = 0; layer < nLayers; layer++) {
      grid.append(el("div", { class: "layer-label", text: `layer ${layer}` }));
      thumbs.push([]);
      for (let head = 0; head < nHeads; head++) {
        const key = `L${layer}h${head}`;
        const canvas = el("canvas");
        const cell = el("div", { class: "head-thumb", "data-layer": layer, "data-head": head, title: stories[key] || noteText(key) || key,
                                 onclick: () => { state.layer = layer; state.head = head; update(); } },
          el("div", { class: "name" }, `L${layer} h${head}`), canvas, el("div", { class: "role", text: noteText(key) }));
        thumbs[layer].push({ cell, canvas });
        grid.append(cell);
      }
    }
    const big = el("canvas", { id: "attention-big" });
    const tip = el("div", { class: "tip" });
    const caption = el("div", { class: "caption" });
    const viewer = el("div", { class: "viewer" }, el("h3", { id: "attention-title" }), big, tip, caption, colourBar());
    const note = Object.keys(notes).length ? el("p", { class: "muted", text: "Under each head: what the analyses below say of it (" +
      d.analyses.filter((a) => !a.headline && Object.keys(a.notes || {}).length).map((a) => a.title.toLowerCase()).join(", ") + ")" +
      (Object.keys(stories).length ? "; click a head for the one sentence that puts them together." : ".") }) : null;
    s.append(controls, el("div", { class: "row" }, el("div", {}, grid, note), viewer));

    const weightsOf = (snap, layer, probe, head) => snaps[snap].weights[layer][probe][head];
    function drawThumb(canvas, w) {
      const T = w.length;
      canvas.width = T; canvas.height = T;
      const ctx = canvas.getContext("2d"), img = ctx.createImageData(T, T);
      for (let q = 0; q < T; q++) {
        for (let k = 0; k < T; k++) {
          const [r, g, b] = k <= q ? viridis(w[q][k]) : [255, 255, 255];
          img.data.set([r, g, b, 255], 4 * (q * T + k));
        }
      }
      ctx.putImageData(img, 0, 0);
    }
    let layout = null;
    function drawBig() {
      const snap = snaps[state.snap], w = weightsOf(state.snap, state.layer, state.probe, state.head);
      const tokens = snap.tokens[state.probe], keys = d.key_labels || tokens.map(() => ""), T = w.length;
      const room = Math.min(460, (s.clientWidth || 544) - 84);  // the section's width (a phone: 420 px) less the labels
      const cell = Math.max(12, Math.min(30, Math.floor(room / T))), font = Math.min(13, Math.round(cell * 0.5));
      const left = 64, top = 8, bottom = 46;
      const W = left + T * cell + 10, H = top + T * cell + bottom, ratio = window.devicePixelRatio || 1;
      big.width = W * ratio; big.height = H * ratio; big.style.width = W + "px"; big.style.height = H + "px";
      const ctx = big.getContext("2d");
      ctx.scale(ratio, ratio);
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
      for (let q = 0; q < T; q++) {
        for (let k = 0; k <= q; k++) {
          const [r, g, b] = viridis(w[q][k]);
          ctx.fillStyle = `rgb(${r},${g},${b})`;
          ctx.fillRect(left + k * cell, top + q * cell, cell - 1, cell - 1);
        }
      }
      ctx.fillStyle = "#1d2330"; ctx.textBaseline = "middle";
      for (let t = 0; t < T; t++) {
        const where = keys[t] === tokens[t] ? "" : keys[t];  // '=' is '=' already
        ctx.textAlign = "right";
        ctx.font = `600 ${font + 1}px ui-monospace, monospace`;
        ctx.fillText(tokens[t], left - 30, top + t * cell + cell / 2);
        ctx.font = `${font - 1}px system-ui, sans-serif`; ctx.fillStyle = "#5d6675";
        ctx.fillText(where, left - 5, top + t * cell + cell / 2);
        ctx.textAlign = "center"; ctx.fillStyle = "#1d2330";
        ctx.font = `600 ${font + 1}px ui-monospace, monospace`;
        ctx.fillText(tokens[t], left + t * cell + cell / 2, top + T * cell + 10);
        ctx.font = `${font - 1}px system-ui, sans-serif`; ctx.fillStyle = "#5d6675";
        ctx.fillText(where, left + t * cell + cell / 2, top + T * cell + 25);
        ctx.fillStyle = "#1d2330";
      }
      ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#5d6675"; ctx.textAlign = "center";
      ctx.fillText("key (attended to) →", left + (T * cell) / 2, top + T * cell + 40);
      ctx.save(); ctx.translate(10, top + (T * cell) / 2); ctx.rotate(-Math.PI / 2);
      ctx.fillText("query (reading) →", 0, 0); ctx.restore();
      layout = { left, top, cell, T, tokens, keys, w };
    }
    big.addEventListener("mousemove", (ev) => {
      if (!layout) return;
      const rect = big.getBoundingClientRect();
      const k = Math.floor((ev.clientX - rect.left - layout.left) / layout.cell);
      const q = Math.floor((ev.clientY - rect.top - layout.top) / layout.cell);
      if (q < 0 || k < 0 || q >= layout.T || k > q) { tip.style.display = "none"; return; }
      const names = d.key_names || layout.keys;
      tip.textContent = `query ${layout.tokens[q]} (${names[q]}) → key ${layout.tokens[k]} (${names[k]}): ${layout.w[q][k].toFixed(3)}`;
      tip.style.display = "block";
      tip.style.left = (ev.clientX - rect.left + 14) + "px";
      tip.style.top = (ev.clientY - rect.top + big.offsetTop + 12) + "px";
    });
    big.addEventListener("mouseleave", () => { tip.style.display = "none"; });

    function update() {
      snapButtons.forEach((b, i) => b.classList.toggle("on", i === state.snap));
      probeButtons.forEach((b, i) => b.classList.toggle("on", i === state.probe));
      for (let layer = 0; layer < nLayers; layer++) {
        for (let head = 0; head < nHeads; head++) {
          const t = thumbs[layer][head];
          drawThumb(t.canvas, weightsOf(state.snap, layer, state.probe, head));
          t.cell.classList.toggle("on", layer === state.layer && head === state.head);
        }
      }
      drawBig();
      const key = `L${state.layer}h${state.head}`, snap = snaps[state.snap];
      document.getElementById("attention-title").textContent =
        `layer ${state.layer}, head ${state.head} — ${snap.probes[state.probe]}` + (snap.tag === "final" ? "" : ` at step ${snap.step}`);
      caption.replaceChildren(...(stories[key] ? [el("p", { class: "story", text: stories[key] })] : []),
        ...(notes[key] || [["", "nothing recorded about this head"]]).flatMap(([title, text]) =>
          [el("b", { text: title ? `${title.toLowerCase()}: ` : "" }), text, el("br")]));
    }
    function step(delta) {
      const i = (state.layer * nHeads + state.head + delta + nLayers * nHeads) % (nLayers * nHeads);
      state.layer = Math.floor(i / nHeads); state.head = i % nHeads; update();
    }
    document.addEventListener("keydown", (ev) => {
      if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const n = snaps[0].probes.length;
      if (ev.key === "ArrowRight") step(1);
      else if (ev.key === "ArrowLeft") step(-1);
      else if (ev.key === "ArrowDown") { state.probe = (state.probe + 1) % n; update(); }
      else if (ev.key === "ArrowUp") { state.probe = (state.probe + n - 1) % n; update(); }
      else return;
      ev.preventDefault();
    });
    update();
  }

  function colourBar() {
    const canvas = el("canvas", { width: 200, height: 10, style: { width: "200px", height: "10px", display: "block" } });
    const ctx = canvas.getContext("2d");
    for (let x = 0; x < 200; x++) { const [r, g, b] = viridis(x / 199); ctx.fillStyle = `rgb(${r},${g},${b})`; ctx.fillRect(x, 0, 1, 10); }
    return el("div", { class: "muted", style: { marginTop: "6px" } }, "attention weight", canvas,
              el("div", { style: { display: "flex", justifyContent: "space-between", width: "200px" } }, el("span", { text: "0" }), el("span", { text: "0.5" }), el("span", { text: "1" })));
  }

  // ---- the registered analyses (analysis/registry.py): each renders through its view, known by no name ----------
  const byUnit = {
    fraction: (x) => pct(x),
    points: (x) => points(x),
    nats: (x) => fixed(x, 3),
    logit: (x) => (isNum(x) ? (x >= 0 ? "+" : "−") + Math.abs(x).toFixed(2) : "—"),
  };
  const show = (column, x) => (byUnit[column.unit] ? byUnit[column.unit](x) : (x === null || x === undefined || x === "" ? "—" : String(x)));
  const unitWord = { points: "points", nats: "nats", logit: "logits", fraction: "%" };
  const column = (a, key) => a.columns.find((c) => c.key === key) || { key, label: key, unit: "" };

  function signedColour(x, most) {
    if (!isNum(x) || !most) return "#fff";
    const t = Math.min(1, Math.abs(x) / most);
    const [r, g, b] = x >= 0 ? [255 - 40 * t, 255 - 190 * t, 255 - 190 * t] : [255 - 190 * t, 255 - 120 * t, 255 - 20 * t];
    return `rgb(${r | 0},${g | 0},${b | 0})`;
  }
  function sortableTable(a, rows) {
    const state = { key: null, dir: 1 };
    const holder = el("div");
    function draw() {
      const sorted = state.key === null ? rows : [...rows].sort((x, y) => {
        const [u, v] = [x[state.key], y[state.key]];
        return state.dir * (isNum(u) && isNum(v) ? u - v : String(u).localeCompare(String(v)));
      });
      holder.replaceChildren(table(a.columns.map((c) => ({
        label: c.label + (state.key === c.key ? (state.dir > 0 ? " ▲" : " ▼") : ""), num: !!byUnit[c.unit], get: (r) => show(c, r[c.key]) })), sorted));
      holder.querySelectorAll("th").forEach((th, i) => {
        th.style.cursor = "pointer";
        th.title = "sort by this column";
        th.onclick = () => { const key = a.columns[i].key; state.dir = state.key === key ? -state.dir : 1; state.key = key; draw(); };
      });
    }
    draw();
    return holder;
  }
  function headGrid(a, rows, selected) {
    const value = column(a, a.value), nLayers = Math.max(...rows.map((r) => r.layer)) + 1, nHeads = Math.max(...rows.map((r) => r.head)) + 1;
    const at = {};
    for (const r of rows) at[`${r.layer},${r.head}`] = r;
    const most = Math.max(0, ...rows.map((r) => (isNum(r[a.value]) ? Math.abs(r[a.value]) : 0)));
    const colour = (x) => (!byUnit[value.unit] ? "#fff" : a.scale === "loss" ? lossColour(x) : signedColour(x, most));
    const head = el("tr", {}, el("th", {}), [...Array(nHeads).keys()].map((h) => el("th", { text: `h${h}` })));
    const body = [...Array(nLayers).keys()].map((layer) => el("tr", {}, el("th", { text: `L${layer}` }),
      [...Array(nHeads).keys()].map((h) => {
        const r = at[`${layer},${h}`], x = r ? r[a.value] : null;
        const dark = a.scale === "loss" ? isNum(x) && x < -0.5 : isNum(x) && most && Math.abs(x) / most > 0.7;
        return el("td", { class: byUnit[value.unit] ? null : "text", style: { background: colour(x), color: dark ? "#fff" : "#1d2330" },
                          title: r ? a.columns.filter((c) => c.key !== "layer" && c.key !== "head").map((c) => `${c.label}: ${show(c, r[c.key])}`).join("\n") : "",
                          onclick: () => selected(layer, h), text: show(value, x) });
      })));
    return el("table", { class: "heat" }, el("thead", {}, head), el("tbody", {}, body));
  }
  function headsView(s, a, rows) {
    const variants = a.variant ? [...new Set(rows.map((r) => r[a.variant]))] : [null];
    const value = column(a, a.value);
    const detail = el("div", { class: "caption" }, el("span", { class: "muted", text: "Click a head for all its numbers." }));
    function selected(layer, head) {
      const mine = rows.filter((r) => r.layer === layer && r.head === head);
      detail.replaceChildren(el("b", { text: `L${layer}h${head}: ` }),
        mine.map((r) => a.columns.filter((c) => !["layer", "head"].includes(c.key)).map((c) => `${c.label} ${show(c, r[c.key])}`).join(", ")).join(" · "));
    }
    const maps = el("div", { class: "row" });
    for (const v of variants) {
      const mine = v === null ? rows : rows.filter((r) => r[a.variant] === v);
      const title = (v === null ? "" : `${v}: `) + value.label + (unitWord[value.unit] && value.unit !== "fraction" ? ` (${unitWord[value.unit]})` : "");
      maps.append(el("div", {}, el("h3", { text: title }), headGrid(a, mine, selected)));
    }
    s.append(maps, detail, el("details", {}, el("summary", { text: `every row (${rows.length}); click a column to sort` }), sortableTable(a, rows)));
  }
  function curveView(s, a, rows, d) {
    const x = column(a, a.x), y = column(a, a.y), scale = (c) => (c.unit === "fraction" ? 100 : 1);
    const r = d.results, tol = d.tolerance;
    const hlines = isNum(tol) && rows.length ? [{ y: scale(y) * (rows[0][a.y] - tol), label: `intact − ${d.tolerance_text}`, below: true }] : [];
    const vlines = isNum(r.prunable_fraction) ? [{ x: 100 * r.prunable_fraction, label: `prunable ${pct(r.prunable_fraction, 0)}`, colour: "#1f7a3d", bottom: true }] : [];
    const chart = lineChart([{ label: y.label, colour: PALETTE[0],
      points: rows.map((p) => [scale(x) * p[a.x], scale(y) * p[a.y], a.columns.map((c) => `${c.label} ${show(c, p[c.key])}`).join(", "), p[a.point_label]]) }],
      { xLabel: x.label + (x.unit === "fraction" ? " (%)" : ""), yLabel: y.label + (y.unit === "fraction" ? " (%)" : ""),
        yDomain: y.unit === "fraction" ? [-2, 108] : null, xDomain: x.unit === "fraction" ? [0, 100] : null, title: a.title, hlines, vlines });
    s.append(el("div", { class: "row" }, chart, sortableTable(a, rows)));
    if (r.learned === false && a.x === "fraction_removed") {
      s.append(el("p", { class: "muted", text: `Not learned (below ${pct(r.learned_threshold, 0)} exact-match): removing heads costs nothing when there is nothing to lose, so no pruning claim.` }));
    } else if (isNum(r.prunable_fraction) && a.x === "fraction_removed") {
      s.append(el("p", { class: "muted", text: `${pct(r.prunable_fraction, 0)} of the heads can go losing at most ${d.tolerance_text} of exact-match` +
                                              (r.pruning_order ? ` (${r.pruning_order} order).` : ".") }));
    }
  }
  function graphView(s, a, rows) {
    // a.nodes: [{name, x, y}]; rows: edges (a.source -> a.target, into a.port), a.member marks the circuit's;
    // one drawing per a.variant value, line width by |a.value|, a.circuits[variant] its size and faithfulness
    const at = Object.fromEntries(a.nodes.map((n) => [n.name, n]));
    const xs = a.nodes.map((n) => n.x), ys = a.nodes.map((n) => n.y);
    const unit = 62, pad = 34, W = (Math.max(...xs) - Math.min(...xs)) * unit + 2 * pad, H = (Math.max(...ys) - Math.min(...ys)) * unit + 2 * pad;
    const px = (n) => pad + (n.x - Math.min(...xs)) * unit, py = (n) => H - pad - (n.y - Math.min(...ys)) * unit;
    const portColour = { q: "#3b6fb6", k: "#2e9e5b", v: "#e08a1e", in: "#55606e" }, portShift = { q: -9, k: 0, v: 9, in: 0 };
    const isMember = (r) => r[a.member] === true || r[a.member] === "True" || r[a.member] === 1;
    const value = column(a, a.value);
    const row = el("div", { class: "row" });
    for (const v of [...new Set(rows.map((r) => r[a.variant]))]) {
      const edges = rows.filter((r) => r[a.variant] === v && isMember(r));
      const used = new Set(edges.flatMap((r) => [r[a.source], r[a.target]]));
      const most = Math.max(1e-9, ...edges.map((r) => Math.abs(r[a.value])));
      const drawing = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `circuit of ${v}` });
      for (const r of [...edges].sort((x, y) => Math.abs(x[a.value]) - Math.abs(y[a.value]))) {
        const [s0, t0] = [at[r[a.source]], at[r[a.target]]];
        if (!s0 || !t0) continue;
        const line = svg("line", { x1: px(s0), y1: py(s0) - 12, x2: px(t0) + (portShift[r[a.port]] || 0), y2: py(t0) + 12,
                                   stroke: portColour[r[a.port]] || "#55606e", "stroke-width": 1 + 6 * Math.abs(r[a.value]) / most,
                                   "stroke-linecap": "round", opacity: 0.8 });
        line.append(svg("title", {}, `${r[a.source]} → ${r[a.target]} (${r[a.port]}): ` +
          a.columns.filter((c) => byUnit[c.unit]).map((c) => `${c.label} ${show(c, r[c.key])}`).join(", ")));
        drawing.append(line);
      }
      for (const n of a.nodes) {
        const on = used.has(n.name);
        drawing.append(svg("circle", { cx: px(n), cy: py(n), r: 17, fill: on ? "#f3d9a4" : "#eceff3", stroke: on ? "#1d2330" : "#b8bec8" }),
                       svg("text", { x: px(n), y: py(n) + 4, "text-anchor": "middle", "font-size": 11, fill: on ? "#1d2330" : "#8a93a0" }, n.name));
      }
      const c = (a.circuits || {})[v];
      const caption = c ? `${c.edges} of ${Math.round(c.edges / c.fraction)} edges recover ${pct(c.faithfulness, 0)}; random sets as large ${pct(c.random_mean, 0)} ± ${pct(c.random_std, 0)}` : "";
      row.append(el("div", {}, el("h3", { text: `${v}` }), drawing, el("div", { class: "caption", text: caption })));
    }
    const key = el("p", { class: "muted" }, "Edges into a head's ", ...Object.entries(portColour).map(([p, colour]) =>
      el("span", { style: { color: colour, fontWeight: "bold" }, text: ` ${p} ` })), ` input; width: ${value.label}. Hover an edge for its numbers.`);
    s.append(row, key, el("details", {}, el("summary", { text: `every edge (${rows.length}); click a column to sort` }), sortableTable(a, rows)));
  }
  function analysisSections(d) {
    for (const a of d.analyses) guarded(a.name, a.title, () => {
      const s = section(a.name, a.title, a.intro);
      if (!a.rows || !a.rows.length) { s.append(el("p", { class: "muted", text: `Not recorded (no readable ${a.name}.csv in the run directory).` })); return; }
      if (a.view === "heads") headsView(s, a, a.rows);
      else if (a.view === "curve") curveView(s, a, a.rows, d);
      else if (a.view === "graph" && a.nodes) graphView(s, a, a.rows);
      else s.append(sortableTable(a, a.rows));
    });
  }

  // A section drawn from a damaged file (a value of the wrong kind where the page needs a number, a list, ...) must
  // not stop the page: what it drew is taken back, it says "Not recorded", and the sections after it still draw.
  function guarded(id, title, draw) {
    const before = root.childNodes.length;
    try {
      draw();
    } catch (e) {
      while (root.childNodes.length > before) root.lastChild.remove();
      section(id, title).append(el("p", { class: "muted damaged",
        text: `Not recorded: what the run directory holds for this section is damaged (${String(e && e.message || e).slice(0, 200)}).` }));
    }
  }

  function labSection(d) {  // the model itself, run by analysis/lab.js in this page
    const s = section("lab", "Lab: ask the model, switch its heads",
      "Type a problem: the model answers it here, digit by digit, with its probability for each. Click a head to " +
      "switch it off (its output zeroed) or to its mean output, and compare the answer and the maps with the clean " +
      "ones; a guided experiment sets them up for you. The URL keeps the experiment: send it to show someone the " +
      "same thing. Nothing leaves this page.");
    if (!d.lab || d.lab.error) {
      s.append(el("p", { class: "muted", text: d.lab ? d.lab.error : "No model recorded for this run." }));
      return;
    }
    const box = el("div", { id: "lab-box" });
    s.append(box);
    TinycalcLab.render(box, TinycalcLab.load(d.lab));
    const stories = d.results.head_stories || {};  // hover a switch: that head's one sentence (analysis/metrics/head_story.py)
    box.querySelectorAll(".lab-switch").forEach((b) => { if (typeof stories[b.dataset.head] === "string") b.title = stories[b.dataset.head]; });
  }

  // A place as the whole page names it: r0 (units), r1 (tens), ... (the lab's own names, analysis/lab.js)
  const placeText = (short) => {
    const digit = /^r(\d+)$/.exec(String(short));
    return digit ? `${short} (${TinycalcLab.placeName(Number(digit[1]))})` : String(short);
  };

  function mistakesSection(d) {
    const s = section("mistakes", "Test mistakes");
    const m = d.mistakes;
    if (!m) { s.append(el("p", { class: "muted", text: "Not recorded (this run has no test_mistakes.json)." })); return; }
    s.append(el("p", {}, `${num(m.n_mistakes)} of ${num(m.n_test)} held-out test problems answered wrong` +
                         (isNum(m.n_test) && m.n_test ? ` (${pct(m.n_mistakes / m.n_test)})` : "") + "."));
    if (!m.mistakes.length) return;
    if (m.wrong_digits_by_place && d.answer_places) {
      const most = Math.max(1, ...m.wrong_digits_by_place);
      s.append(el("h3", { text: `wrong answer digits by place, among the ${num(m.n_recorded)} recorded mistakes (in the order the model writes them)` }),
        table([{ label: "place", get: (p) => p.place }, { label: "wrong", num: true, get: (p) => p.n },
               { label: "", get: (p) => el("span", { class: "bar", style: { width: `${(120 * p.n) / most}px` } }) }],
              m.wrong_digits_by_place.map((n, i) => ({ place: placeText(d.answer_places[i]), n }))));
    }
    s.append(el("h3", { text: m.mistakes.length < m.n_mistakes ? `the first ${m.mistakes.length} of ${num(m.n_mistakes)}` : "all of them" }),
      table([
        { label: "problem", mono: true, get: (x) => x.problem },
        { label: "model", num: true, get: (x) => (x.model === null || x.model === undefined ? "unreadable" : x.model) },
        { label: "truth", num: true, get: (x) => x.truth },
        { label: "as written", mono: true, get: (x) => x.model_text ?? "" },
      ], m.mistakes));
  }

  function renderRun(d) {
    const r = d.results, ok = r.status === "ok";
    header(`tinycalc run ${d.name}`, ok, r.status || "unknown");
    root.append(el("p", { class: "intro", text: ok ? `${taskText(r)} — what the model learned and what each head does.` :
      `This run did not finish: ${r.error || r.status}` + (r.resume ? ` Resume it with: ${r.resume}` : "") }));
    if (!ok) return;
    root.append(el("nav", {}, [["lab", "lab"], ["config", "task"], ["curves", "curves"], ["attention", "attention"],
                               ...d.analyses.map((a) => [a.name, a.name]), ["mistakes", "mistakes"]]
      .map(([id, text]) => el("a", { href: `#${id}`, text }))));
    guarded("summary", "Summary", () => summarySection(d));
    guarded("lab", "Lab", () => labSection(d));
    guarded("config", "Task and configuration", () => configSection(d));
    guarded("curves", "Learning curves", () => curvesSection(d));
    guarded("attention", "Attention, head by head", () => attentionSection(d));
    analysisSections(d);
    guarded("mistakes", "Test mistakes", () => mistakesSection(d));
  }

  // ---- sweep page -------------------------------------------------------------------------------------------
  function renderSweep(d) {
    const rows = d.rows, failed = rows.filter((r) => r.status !== "ok"), done = rows.filter((r) => r.status === "ok");
    header(`tinycalc sweep ${d.name}`, !failed.length, failed.length ? `${failed.length} of ${rows.length} failed` : `${rows.length} runs`);
    const scored = done.filter((r) => isNum(r.test_exact_match)), top = Math.max(...scored.map((r) => r.test_exact_match));
    const tied = scored.filter((r) => r.test_exact_match === top);  // a tie is a tie: every run that has the best
    const bestLabel = !tied.length ? "best test exact-match" : tied.length === 1 ? `best test exact-match (${tied[0].run})`
      : tied.length === scored.length ? `best test exact-match: a tie of all ${tied.length} runs` : `best test exact-match: a tie of ${tied.length} runs`;
    root.append(el("div", { class: "cards", id: "summary" }, card(String(rows.length), "runs"), card(String(done.length), "finished"),
      card(String(failed.length), "failed"), card(tied.length ? pct(top) : "—", bestLabel)));

    const t = section("runs", "Runs", "One row per job; the link opens that run's own report.");
    t.append(table([
      { label: "run", mono: true, get: (r) => r.run },
      { label: "n_heads", num: true, get: (r) => r.n_heads ?? "—" },
      { label: "head_dim", num: true, get: (r) => r.head_dim ?? "—" },
      { label: "params", num: true, get: (r) => num(r.n_params) },
      { label: `steps to ${pct(d.milestone, 0)}`, num: true, get: (r) => (r.status !== "ok" ? "—" : r.steps_to_99 ?? "never") },
      { label: "test exact-match", num: true, get: (r) => pct(r.test_exact_match) },
      { label: "train s", num: true, get: (r) => fixed(r.train_seconds, 1) },
      { label: "prunable", num: true, get: (r) => (r.status === "ok" && r.learned === false ? "not learned" : isNum(r.prunable_fraction) ? pct(r.prunable_fraction, 0) : "—") },
      { label: "status", get: (r) => (r.status === "ok" ? "ok" : "failed") },
      { label: "report", get: (r) => (r.report ? el("a", { href: r.report, text: "report" }) : "—") },
    ], rows, { rowClass: (r) => (r.status === "ok" ? null : "failed") }));
    if (d.grouped.length) {
      const spread = (g) => (g ? `${+g[0].toPrecision(4)} (${+g[1].toPrecision(4)}..${+g[2].toPrecision(4)})` : "—");
      t.append(el("h3", { text: "mean (min..max) over seeds" }), table([
        { label: "setting", mono: true, get: (g) => g.setting }, { label: "runs", num: true, get: (g) => g.runs },
        { label: "test exact-match", num: true, get: (g) => spread(g.test_exact_match) },
        { label: `steps to ${pct(d.milestone, 0)}`, num: true, get: (g) => spread(g.steps_to_99) },
        { label: "train s", num: true, get: (g) => spread(g.train_seconds) },
        { label: "prunable", num: true, get: (g) => spread(g.prunable_fraction) },
      ], d.grouped));
    }

    const c = section("curves", "Accuracy against training step", "Validation exact-match of every run; runs of one setting share a colour, one dash per seed.");
    const settings = [];
    const settingOf = (r) => r.run.split(" ").filter((o) => !o.startsWith("seed=")).join(" ") || "(defaults)";
    for (const r of rows) if (!settings.includes(settingOf(r))) settings.push(settingOf(r));
    const seeds = [...new Set(rows.map((r) => r.seed))];
    const series = rows.filter((r) => r.history.length).map((r) => ({
      label: r.run, colour: PALETTE[settings.indexOf(settingOf(r)) % PALETTE.length],
      dash: ["", "6 3", "2 3", "8 3 2 3"][seeds.indexOf(r.seed) % 4] || null,
      points: r.history.map((h) => [h.step, 100 * h.exact_match, `${r.run}, step ${h.step}: ${pct(h.exact_match)}`]) }));
    if (series.length) {
      c.append(lineChart(series, { xLabel: "training step", yLabel: "val exact-match (%)", yDomain: [-2, 102], width: 760, height: 320,
                                   hlines: [{ y: 100 * d.milestone, label: pct(d.milestone, 0) }], title: "learning curves" }), legend(series));
    } else c.append(el("p", { class: "muted", text: "No run recorded a validation history." }));

    for (const a of d.heads || []) guarded(a.name, a.title, () => {  // every per-head analysis, one heatmap per run
      const h = section(a.name, a.title, a.intro);                       // (the first variant's)
      const grids = el("div", { class: "row" });
      for (const run of a.runs) {
        const first = a.variant ? run.rows.filter((r) => r[a.variant] === run.rows[0][a.variant]) : run.rows;
        const label = run.run + (a.variant ? ` — ${first[0][a.variant]}` : "");
        grids.append(el("div", {}, el("h3", { class: "mono", text: label }), headGrid(a, first, () => {})));
      }
      h.append(grids);
    });

    const f = section("failed", "Failed jobs");
    if (!failed.length) f.append(el("p", { class: "muted", text: "None: every job finished." }));
    else {
      f.append(table([
        { label: "run", mono: true, get: (r) => el("span", { title: r.dir, text: r.run }) },
        { label: "reason", get: (r) => r.status.replace(/^failed: /, "") },
        { label: "traceback", get: (r) => (r.error_log ? el("a", { href: r.error_log, text: "error.log" }) : "—") },
      ], failed, { rowClass: () => "failed" }));
    }

    const k = section("conclusion", "Conclusion", "Computed from this sweep's own runs (analysis/conclusion.py; sweep_summary.md ends with the same words).");
    k.append(el("ul", {}, (d.conclusion || []).map((line) => el("li", { text: line }))));
  }

  if (DATA.kind === "sweep") renderSweep(DATA); else renderRun(DATA);
  document.body.dataset.rendered = DATA.kind;
  document.body.dataset.renderMs = (performance.now() - started).toFixed(1);
})();
