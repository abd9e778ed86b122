(function () {
  "use strict";
  const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", ' +
    '"Liberation Sans", Arial, sans-serif';
  // Category colours come with the payload (locus.palette); these are the page's own marks.
  const SINGLE = "#4e79a7", OTHER = "#98a2b3", UNKNOWN = "#d0d5dd";
  const ACCENT = "#2563eb", PROXY = "#d97706", INK = "#101828", LABEL = "#475467";
  const LABEL_SIZE = 11;
  // Pools up to this size get a number on the map where a name does not fit (the list says
  // whose); on larger maps numbers would be noise, so hover, search and the list name them.
  const MAX_NUMBERED = 100;
  const CONFIG = {displaylogo: false, responsive: true, scrollZoom: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
    toImageButtonOptions: {filename: "locus-atlas", scale: 2}};

  const $ = (id) => document.getElementById(id);
  window.addEventListener("error", (e) => {
    const box = $("error");
    box.textContent = "The atlas failed to draw: " + e.message;
    box.style.display = "block";
  });
  const data = JSON.parse($("atlas-data").textContent);
  const llms = data.llms;
  const indexOf = new Map(llms.map((llm, i) => [llm.llm_id, i]));
  const projections = Object.keys(data.projections);
  const portfolios = data.portfolios || {};
  const methods = Object.keys(portfolios);
  const colourFields = data.colour_by || [];
  const colourTables = data.colours || {};
  const colourNotes = data.colour_notes || {};
  const kept = data.projection_kept || {};
  const plot = $("plot"), panel = $("panel");
  const state = {projection: projections[0], colourBy: colourFields[0] || null,
    labels: true, selected: null, method: null, k: null, query: "", group: null, view: null,
    named: 0, numbered: 0};

  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const nameOf = (llm) => llm.display_name || llm.llm_id;
  const llmById = (id) => llms[indexOf.get(id)];
  const missing = (v) => v === null || v === undefined;
  const percent = (v, digits) => missing(v) ? "–" : (100 * v).toFixed(digits) + "%";
  const fixed = (v) => missing(v) ? "–" : Number(v).toFixed(3);
  // Natural order: runs of digits as numbers, the rest case-insensitively, compared by code
  // unit; locus.atlas.plots.llm_numbers numbers the PNG's LLMs the same way.
  function naturalKey(text) {
    return text.split(/([0-9]+)/).filter((part) => part !== "").map((part) =>
      /^[0-9]+$/.test(part) ? [0, Number(part)] : [1, part.toLowerCase()]);
  }
  function naturalCompare(a, b) {
    const x = naturalKey(a), y = naturalKey(b);
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i][0] !== y[i][0]) return x[i][0] - y[i][0];
      if (x[i][1] < y[i][1]) return -1;
      if (x[i][1] > y[i][1]) return 1;
    }
    return x.length - y.length;
  }
  function show(v) {
    if (v === null || v === undefined || v === "") return "unknown";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v === "number") {
      if (Number.isInteger(v)) return v.toLocaleString("en-US");
      const a = Math.abs(v);
      return (a < 1e-3 || a >= 1e6) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
    }
    return String(v);
  }
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "style") node.style.cssText = value;
      else if (key === "onclick") node.addEventListener("click", value);
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  // Every LLM has a number: its place in the list beside the map (names in natural order).
  const listed = [...llms].sort((a, b) => naturalCompare(nameOf(a), nameOf(b)) ||
    naturalCompare(a.llm_id, b.llm_id));
  const numberOf = new Map(listed.map((llm, i) => [llm.llm_id, i + 1]));
  const numbered = llms.length <= MAX_NUMBERED;

  // --- colours: one table per field, in legend order, from the payload ---
  function categoryOf(llm, field) {
    const v = field === null ? null : llm[field];
    if (v === null || v === undefined || v === "") return "unknown";
    const key = typeof v === "boolean" ? (v ? "true" : "false") : String(v);
    const table = colourTables[field] || {};
    return key in table ? key : "other";
  }
  function colourOf(llm) {
    if (state.colourBy === null) return SINGLE;
    const category = categoryOf(llm, state.colourBy);
    const table = colourTables[state.colourBy] || {};
    if (category in table) return table[category];
    return category === "unknown" ? UNKNOWN : OTHER;
  }
  function legendEntries(field) {
    const counts = new Map();
    for (const llm of llms) {
      const c = categoryOf(llm, field);
      counts.set(c, (counts.get(c) || 0) + 1);
    }
    const table = colourTables[field] || {};
    const order = Object.keys(table).filter((c) => counts.has(c));
    for (const c of counts.keys()) if (!order.includes(c)) order.push(c);
    return order.map((c) => ({category: c, count: counts.get(c),
      colour: table[c] || (c === "unknown" ? UNKNOWN : OTHER)}));
  }

  // Marker diameter grows with accuracy across the pool's range; large pools draw smaller.
  const accuracies = llms.map((llm) => llm.accuracy).filter((v) => typeof v === "number");
  const lowest = Math.min(...accuracies), highest = Math.max(...accuracies);
  const scale = Math.max(0.4, Math.min(1, Math.sqrt(40 / llms.length)));
  const baseSize = llms.map((llm) => {
    const t = typeof llm.accuracy !== "number" ? 0
      : highest > lowest ? (llm.accuracy - lowest) / (highest - lowest) : 0.5;
    return Math.max(4, (9 + 17 * t) * scale);
  });

  const factFields = ["family", "cluster", ...colourFields].filter(
    (f, i, all) => all.indexOf(f) === i && llms.some((llm) => f in llm));
  const hoverTexts = llms.map((llm) => {
    const lines = ["<b>" + esc(nameOf(llm)) + '</b>  <span style="color:#667085">#' +
      numberOf.get(llm.llm_id) + "</span>"];
    if (llm.display_name && llm.display_name !== llm.llm_id) {
      lines.push('<span style="color:#667085">' + esc(llm.llm_id) + "</span>");
    }
    const facts = factFields.filter((f) => f in llm).map((f) => esc(f) + ": " + esc(show(llm[f])));
    facts.push("accuracy: " + percent(llm.accuracy, 1));
    lines.push(facts.join("  ·  "));
    for (const [key, value] of Object.entries(llm.metadata || {})) {
      if (value !== null && value !== undefined && value !== "") {
        lines.push('<span style="color:#667085">' + esc(key) + ":</span> " + esc(show(value)));
      }
    }
    const neighbours = (llm.neighbours || []).slice(0, 5);
    if (neighbours.length) {
      lines.push("<b>nearest neighbours</b> " +
        '<span style="color:#667085">distance · agreement</span>');
      neighbours.forEach((n, j) => lines.push((j + 1) + ". " + esc(nameOf(llmById(n.llm_id))) +
        '  <span style="color:#667085">' + fixed(n.distance) + " · " + percent(n.agreement, 0) +
        "</span>"));
    }
    return lines.join("<br>");
  });

  // --- what is in focus: a selection, a search, a legend group, a portfolio ---
  const compact = (s) => s.toLowerCase().replace(/[^a-z0-9]+/g, "");
  function matches(query) {
    const q = query.trim().toLowerCase(), c = compact(query);
    if (!q) return null;
    return new Set(llms.filter((llm) => {
      const texts = [nameOf(llm), llm.llm_id];
      return texts.some((t) => t.toLowerCase().includes(q) || (c && compact(t).includes(c)));
    }).map((llm) => llm.llm_id));
  }
  function found() {
    const byQuery = matches(state.query);
    if (state.group === null) return byQuery;
    const inGroup = new Set(llms.filter((llm) => categoryOf(llm, state.colourBy) === state.group)
      .map((llm) => llm.llm_id));
    return byQuery === null ? inGroup : new Set([...inGroup].filter((id) => byQuery.has(id)));
  }
  function portfolioSizes(method) {
    return Object.keys(portfolios[method] || {}).map(Number).sort((a, b) => a - b);
  }
  function chosenIds() {
    if (!state.method) return null;
    const chosen = portfolios[state.method][String(state.k)];
    return chosen ? chosen : [];
  }
  function focusRoles() {
    if (state.selected === null) return null;
    const llm = llmById(state.selected);
    const roles = new Map();
    for (const p of llm.proxies || []) roles.set(p.llm_id, "proxy");
    for (const n of llm.neighbours || []) roles.set(n.llm_id, "neighbour");
    roles.set(llm.llm_id, "self");
    return roles;
  }

  // --- the view: fixed axis ranges, so a point's pixel is known before plotly draws it ---
  function fullView() {
    const coords = data.projections[state.projection];
    const xs = llms.map((llm) => coords[llm.llm_id][0]);
    const ys = llms.map((llm) => coords[llm.llm_id][1]);
    const pad = (lo, hi) => {
      const span = hi - lo || 1;
      return [lo - 0.06 * span, hi + 0.06 * span];
    };
    return {x: pad(Math.min(...xs), Math.max(...xs)), y: pad(Math.min(...ys), Math.max(...ys))};
  }
  function currentView() { return state.view || fullView(); }
  function plotArea() {
    const size = plot._fullLayout && plot._fullLayout._size;
    if (size && size.w > 0 && size.h > 0) return {w: size.w, h: size.h};
    return {w: Math.max(plot.clientWidth - 24, 200), h: Math.max(plot.clientHeight - 24, 200)};
  }

  // --- labels: names where they fit, else numbers, never overlapping ---
  const measureContext = document.createElement("canvas").getContext("2d");
  measureContext.font = LABEL_SIZE + "px " + FONT;
  const widthCache = new Map();
  function textWidth(text) {
    if (!widthCache.has(text)) widthCache.set(text, measureContext.measureText(text).width);
    return widthCache.get(text);
  }
  // A label is its own text point, centred on the spot chosen for it; its box there, in
  // pixels: the text's width, 1.25 font sizes of height (plotly's middle-centred text sits
  // 0.7 font sizes above its anchor to 0.55 below).
  const DIRECTIONS = [[1, 0], [-1, 0], [0, -1], [0, 1], [1, -1], [-1, -1], [1, 1], [-1, 1]];
  function labelSpot(px, py, gap, width, direction) {
    const [dx, dy] = direction, f = LABEL_SIZE, corner = dx && dy ? 0.72 : 1;
    const cx = px + dx * (gap * corner + width / 2);
    const cy = py + dy * (gap * corner + 0.625 * f);
    const margin = 1.5;
    return {x: cx, y: cy + 0.075 * f, box: [cx - width / 2 - margin, cy - 0.625 * f - margin,
      cx + width / 2 + margin, cy + 0.625 * f + margin]};
  }
  const intersects = (a, b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];

  // The order labels are placed in: the selection and its relations, what a search or a
  // legend group found, the portfolio, then the most accurate first.
  function placeLabels(sizes, wanted, priority) {
    const view = currentView(), area = plotArea();
    const coords = data.projections[state.projection];
    const pixel = llms.map((llm) => {
      const [x, y] = coords[llm.llm_id];
      return [(x - view.x[0]) / (view.x[1] - view.x[0]) * area.w,
        (view.y[1] - y) / (view.y[1] - view.y[0]) * area.h];
    });
    const inside = (i) => pixel[i][0] >= 0 && pixel[i][0] <= area.w && pixel[i][1] >= 0 &&
      pixel[i][1] <= area.h;
    // A label may graze another point's edge but never cover its middle, so every point stays
    // visible (and one lying on another can still be labelled beside the pair).
    const markers = [];
    llms.forEach((llm, i) => {
      if (!inside(i)) return;
      const r = Math.min(Math.max(sizes[i] / 2 - 2, 1), 4);
      markers.push({i, box: [pixel[i][0] - r, pixel[i][1] - r, pixel[i][0] + r, pixel[i][1] + r]});
    });
    // a coarse grid of the boxes placed so far, so a pool of hundreds places quickly
    const CELL = 48, grid = new Map();
    const cells = (box) => {
      const found = [];
      for (let gx = Math.floor(box[0] / CELL); gx <= Math.floor(box[2] / CELL); gx++) {
        for (let gy = Math.floor(box[1] / CELL); gy <= Math.floor(box[3] / CELL); gy++) {
          found.push(gx + "," + gy);
        }
      }
      return found;
    };
    const add = (box, owner) => {
      for (const key of cells(box)) {
        if (!grid.has(key)) grid.set(key, []);
        grid.get(key).push({box, owner});
      }
    };
    for (const m of markers) add(m.box, m.i);
    const clear = (box, owner) => cells(box).every((key) =>
      (grid.get(key) || []).every((other) => other.owner === owner || !intersects(box, other.box)));
    const fits = (box) => box[0] >= 0 && box[1] >= 0 && box[2] <= area.w && box[3] <= area.h;
    const order = llms.map((_, i) => i).filter((i) => wanted[i] && inside(i))
      .sort((a, b) => priority[a] - priority[b] ||
        (llms[b].accuracy === null ? -1 : llms[b].accuracy) -
        (llms[a].accuracy === null ? -1 : llms[a].accuracy) ||
        numberOf.get(llms[a].llm_id) - numberOf.get(llms[b].llm_id));
    const toData = (px, py) => ({x: view.x[0] + px / area.w * (view.x[1] - view.x[0]),
      y: view.y[1] - py / area.h * (view.y[1] - view.y[0])});
    const placed = new Map();
    // beside the point first; a little farther out (with a leader line) where that is taken
    const rings = (i) => [sizes[i] / 2 + 2, sizes[i] / 2 + 9, sizes[i] / 2 + 18];
    const tryPlace = (i, text, kind, farthest) => {
      const width = textWidth(text);
      const gaps = rings(i).slice(0, farthest + 1);
      for (let ring = 0; ring < gaps.length; ring++) {
        for (const direction of DIRECTIONS) {
          const spot = labelSpot(pixel[i][0], pixel[i][1], gaps[ring], width, direction);
          if (fits(spot.box) && clear(spot.box, i)) {
            add(spot.box, -1 - i);
            const b = spot.box, [px, py] = pixel[i];
            // the leader line ends on the box's nearest edge
            const edge = [Math.min(Math.max(px, b[0] + 1.5), b[2] - 1.5),
              Math.min(Math.max(py, b[1] + 1.5), b[3] - 1.5)];
            placed.set(i, {text, kind, ring, ...toData(spot.x, spot.y),
              edge: Object.values(toData(edge[0], edge[1]))});
            return true;
          }
        }
      }
      return false;
    };
    for (const i of order) tryPlace(i, nameOf(llms[i]), "name", 1);
    if (numbered) {
      for (const i of order) {
        if (!placed.has(i)) tryPlace(i, String(numberOf.get(llms[i].llm_id)), "number", 2);
      }
    }
    return placed;
  }

  function linkTrace(from, relations, colour, dash, coords) {
    const x = [], y = [];
    for (const r of relations) {
      x.push(coords[from][0], coords[r.llm_id][0], null);
      y.push(coords[from][1], coords[r.llm_id][1], null);
    }
    return {type: "scatter", mode: "lines", x, y, hoverinfo: "skip", showlegend: false,
      line: {color: colour, width: 1.6, dash}, opacity: 0.7};
  }

  function traces() {
    const coords = data.projections[state.projection];
    const roles = focusRoles();
    const chosenList = chosenIds();
    const chosen = chosenList === null || !chosenList.length ? null : new Set(chosenList);
    const hits = found();
    const result = [];
    if (roles !== null) {
      const llm = llmById(state.selected);
      const neighbours = llm.neighbours || [];
      const near = new Set(neighbours.map((n) => n.llm_id));
      const proxies = (llm.proxies || []).filter((p) => !near.has(p.llm_id));
      if (proxies.length) result.push(linkTrace(llm.llm_id, proxies, PROXY, "dot", coords));
      if (neighbours.length) {
        result.push(linkTrace(llm.llm_id, neighbours, ACCENT, "solid", coords));
      }
    }
    const look = llms.map((llm, i) => {
      const id = llm.llm_id;
      const inPortfolio = chosen !== null && chosen.has(id);
      const role = roles === null ? undefined : roles.get(id);
      const hit = hits !== null && hits.has(id);
      let size = baseSize[i], opacity = 0.88, width = 1, ring = "#ffffff", ink = LABEL;
      let labelled = true, priority = 5;
      // Faded points lose their labels, so the highlighted ones stay readable.
      if (hits !== null && !hit) { opacity = 0.15; labelled = false; }
      if (hit) { opacity = 1; width = 2.5; ring = ACCENT; ink = INK; priority = 1; }
      if (chosen !== null && !inPortfolio) { opacity = Math.min(opacity, 0.25); labelled = false; }
      if (roles !== null && role === undefined) { opacity = 0.12; labelled = false; }
      if (roles !== null && role !== undefined) {
        opacity = 1; ink = INK; width = 2.5; labelled = true; priority = 0;
      }
      if (role === "neighbour") ring = ACCENT;
      if (role === "proxy") ring = PROXY;
      // Portfolio members keep their dark ring (fainter when the highlight leaves them out).
      if (inPortfolio) {
        size += 8; width = 3; ring = INK; priority = Math.min(priority, 2);
        if (role === undefined && (hits === null || hit)) {
          opacity = roles === null ? 1 : 0.45; ink = INK; labelled = roles === null;
        }
      }
      if (role === "self") { size += 5; width = 3.5; ring = INK; }
      return {i, size, opacity, width, ring, ink, labelled, priority};
    });
    const sizes = look.map((l) => l.size);
    const placed = state.labels ? placeLabels(sizes, look.map((l) => l.labelled),
      look.map((l) => l.priority)) : new Map();
    state.named = [...placed.values()].filter((p) => p.kind === "name").length;
    state.numbered = placed.size - state.named;
    // one trace of every point, the emphasised drawn last (on top)
    const drawOrder = [...look].sort((a, b) => a.opacity - b.opacity || b.priority - a.priority);
    const points = {type: "scatter", mode: "markers", name: "LLMs", showlegend: false,
      cliponaxis: false, x: [], y: [], hovertext: [], customdata: [],
      hovertemplate: "%{hovertext}<extra></extra>",
      marker: {color: [], size: [], opacity: [], line: {width: [], color: []}}};
    for (const l of drawOrder) {
      const llm = llms[l.i], id = llm.llm_id;
      points.x.push(coords[id][0]); points.y.push(coords[id][1]);
      points.hovertext.push(hoverTexts[l.i]); points.customdata.push(id);
      points.marker.color.push(colourOf(llm));
      points.marker.size.push(l.size); points.marker.opacity.push(l.opacity);
      points.marker.line.width.push(l.width); points.marker.line.color.push(l.ring);
    }
    // a label set apart from its point gets a faint line to it
    const leaders = {type: "scatter", mode: "lines", x: [], y: [], hoverinfo: "skip",
      showlegend: false, line: {color: "#b8c0cc", width: 0.8}};
    const names = {type: "scatter", mode: "text", name: "labels", showlegend: false,
      hoverinfo: "skip", cliponaxis: true, x: [], y: [], text: [], customdata: [],
      textposition: "middle center", textfont: {family: FONT, size: LABEL_SIZE, color: []}};
    for (const [i, label] of placed) {
      const id = llms[i].llm_id;
      names.x.push(label.x); names.y.push(label.y); names.text.push(esc(label.text));
      names.customdata.push(id);
      names.textfont.color.push(label.kind === "number" ? "#667085" : look[i].ink);
      if (label.ring > 0) {
        leaders.x.push(coords[id][0], label.edge[0], null);
        leaders.y.push(coords[id][1], label.edge[1], null);
      }
    }
    result.push(leaders, points, names);
    return result;
  }

  function layout() {
    const view = currentView();
    const axis = (n, range) => ({
      title: {text: esc(state.projection) + " " + n, font: {size: 11, color: "#98a2b3"}},
      showticklabels: false, ticks: "", zeroline: false, showgrid: true, gridcolor: "#f0f2f5",
      showline: false, autorange: false, range: range.slice()});
    return {font: {family: FONT, size: 12, color: "#1d2433"}, paper_bgcolor: "#ffffff",
      plot_bgcolor: "#ffffff", margin: {l: 28, r: 10, t: 10, b: 28}, hovermode: "closest",
      dragmode: "pan", showlegend: false, xaxis: axis(1, view.x), yaxis: axis(2, view.y),
      hoverlabel: {bgcolor: "#ffffff", bordercolor: "#d0d5dd", align: "left",
        font: {family: FONT, size: 12, color: "#1d2433"}}};
  }

  let drawn = false;
  function render() {
    renderPanel();
    renderLegend();
    renderList();
    const first = !drawn;
    const call = drawn ? Plotly.react : Plotly.newPlot;
    return call(plot, traces(), layout(), CONFIG).then(() => {
      drawn = true;
      // labels are placed for the plot's size in pixels, known once it is drawn
      if (first && state.labels) return Plotly.react(plot, traces(), layout(), CONFIG);
      return undefined;
    }).then(() => { renderCaption(); });
  }
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (drawn && state.labels) render(); }, 150);
  });

  // --- the side: legend, search, details, the list of every LLM ---
  function llmButton(id, role) {
    const llm = llmById(id);
    const swatch = el("span", {class: "swatch", style: "background:" + colourOf(llm)});
    return el("button", {type: "button", class: "llm", title: id, dataset: {llmId: id, role},
      onclick: () => highlight(id)}, swatch, nameOf(llm));
  }
  function renderLegend() {
    const box = $("legend");
    box.replaceChildren();
    if (state.colourBy === null) return;
    const chips = legendEntries(state.colourBy).map((entry) => el("button", {
      type: "button", class: "chip" + (state.group === entry.category ? " on" : ""),
      title: "show the " + entry.count + " LLM" + (entry.count === 1 ? "" : "s") + " of " +
        entry.category, dataset: {category: entry.category},
      onclick: () => showGroup(state.group === entry.category ? null : entry.category)},
    el("span", {class: "swatch", style: "background:" + entry.colour}), entry.category,
    el("span", {class: "count"}, String(entry.count))));
    box.append(el("div", {class: "legend-title"}, "Colour: " + state.colourBy),
      el("div", {class: "chips"}, ...chips));
    if (colourNotes[state.colourBy]) {
      box.append(el("p", {class: "note", id: "colour-note"}, colourNotes[state.colourBy]));
    }
  }
  function renderList() {
    const hits = found();
    const list = $("llm-list");
    list.replaceChildren(...listed.map((llm) => {
      const id = llm.llm_id;
      const row = el("li", {dataset: {llmId: id}, class: id === state.selected ? "current" : ""},
        el("button", {type: "button", class: "entry", title: id, onclick: () => highlight(id)},
          el("span", {class: "number"}, String(numberOf.get(id))),
          el("span", {class: "swatch", style: "background:" + colourOf(llm)}),
          el("span", {class: "name"}, nameOf(llm)),
          el("span", {class: "acc"}, percent(llm.accuracy, 0))));
      row.hidden = hits !== null && !hits.has(id);
      return row;
    }));
    const shown = hits === null ? llms.length : hits.size;
    $("list-title").textContent = hits === null ? "All " + llms.length + " LLMs"
      : shown + " of " + llms.length + " LLMs";
    $("search-count").textContent = state.query.trim() ? shown + " found" : "";
  }
  function renderCaption() {
    const low = accuracies.length ? percent(lowest, 0) : "–";
    const high = accuracies.length ? percent(highest, 0) : "–";
    let text = "Each point is an LLM; nearby points answer the same queries alike. Size: " +
      "accuracy (" + low + " to " + high + ").";
    if (state.labels) {
      text += " " + state.named + " of " + llms.length + " named on the map" +
        (state.numbered ? ", " + state.numbered + " numbered (its place in the list)" : "") +
        "; zoom in for more names.";
    }
    $("caption").textContent = text;
  }
  function relationTable(relations, role) {
    const rows = relations.map((r, j) => el("tr", {dataset: {role, llmId: r.llm_id}},
      el("td", {class: "rank"}, String(j + 1)), el("td", {}, llmButton(r.llm_id, role)),
      el("td", {class: "num"}, fixed(r.distance)),
      el("td", {class: "num"}, percent(r.agreement, 0),
        el("span", {class: "bar", style: "width:" + Math.round(30 * (r.agreement || 0)) + "px"}))));
    return el("table", {class: role === "proxy" ? "proxies" : "neighbours"},
      el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "LLM"),
        el("th", {class: "num"}, "distance"), el("th", {class: "num"}, "agreement"))),
      el("tbody", {}, ...rows));
  }
  function renderPanel() {
    panel.replaceChildren();
    if (state.method) {
      const chosen = chosenIds();
      const box = el("section", {id: "portfolio"},
        el("h3", {}, "Portfolio · " + state.method + " · k = " + state.k));
      if (chosen.length) {
        box.append(el("ol", {class: "portfolio", id: "portfolio-list"},
          ...chosen.map((id) => el("li", {dataset: {llmId: id}}, llmButton(id, "portfolio")))));
      } else {
        box.append(el("p", {class: "hint"}, "No " + state.method + " portfolio of size " +
          state.k + "; sizes: " + portfolioSizes(state.method).join(", ") + "."));
      }
      panel.append(box);
    }
    if (state.selected !== null) {
      const llm = llmById(state.selected);
      const box = el("section", {id: "selected", dataset: {llmId: llm.llm_id}});
      box.append(el("h3", {}, "Selected LLM · #" + numberOf.get(llm.llm_id)),
        el("h2", {}, nameOf(llm)));
      if (llm.display_name && llm.display_name !== llm.llm_id) {
        box.append(el("div", {class: "id"}, llm.llm_id));
      }
      const facts = el("dl", {class: "facts"});
      const fact = (key, value) => facts.append(el("dt", {}, key), el("dd", {}, value));
      for (const f of factFields) if (f in llm) fact(f, show(llm[f]));
      fact("accuracy", percent(llm.accuracy, 1));
      for (const [key, value] of Object.entries(llm.metadata || {})) {
        if (!missing(value) && value !== "") fact(key, show(value));
      }
      box.append(facts);
      box.append(el("h3", {}, "Nearest neighbours"));
      box.append((llm.neighbours || []).length ? relationTable(llm.neighbours, "neighbour")
        : el("p", {class: "hint"}, "None given."));
      box.append(el("h3", {}, "Proxies (fallback order)"));
      box.append((llm.proxies || []).length ? relationTable(llm.proxies, "proxy")
        : el("p", {class: "hint"}, "None given."));
      box.append(el("p", {class: "note", style: "margin-top:12px"},
        el("span", {class: "key"}, el("i"), "neighbour"),
        el("span", {class: "key"}, el("i", {class: "proxy"}), "proxy only"),
        "agreement: share of queries both LLMs get right or both get wrong"));
      panel.append(box);
    }
    if (!state.method && state.selected === null) {
      panel.append(el("p", {class: "hint"}, "Click a point or a name for its neighbours and " +
        "proxies; ", el("kbd", {}, "Esc"), " clears. Scroll to zoom, double-click to fit."));
    }
  }

  // --- the scripting API (also what the controls call) ---
  function highlight(id) {
    if (id !== null && !indexOf.has(id)) throw new Error("unknown LLM " + JSON.stringify(id));
    state.selected = id;
    return render();
  }
  function clear() { return highlight(null); }
  function portfolio(method, k) {
    if (!method) {
      state.method = null; state.k = null; syncControls();
      return render().then(() => null);
    }
    if (!(method in portfolios)) {
      throw new Error("unknown portfolio method " + JSON.stringify(method));
    }
    const sizes = portfolioSizes(method);
    state.method = method;
    state.k = (k === undefined || k === null) ? sizes[Math.min(2, sizes.length - 1)] : Number(k);
    syncControls();
    return render().then(() => chosenIds());
  }
  function setProjection(name) {
    if (!(name in data.projections)) throw new Error("unknown projection " + JSON.stringify(name));
    state.projection = name; state.view = null; syncControls(); return render();
  }
  function setColourBy(field) {
    if (field !== null && !colourFields.includes(field)) {
      throw new Error("unknown colouring " + JSON.stringify(field));
    }
    state.colourBy = field; state.group = null; syncControls(); return render();
  }
  function setLabels(on) { state.labels = Boolean(on); syncControls(); return render(); }
  // Find LLMs by name (case, spaces and dashes ignored): they are highlighted and labelled on
  // the map and the list shows only them; "" ends the search. Returns the ids found.
  function search(text) {
    state.query = String(text || "");
    if ($("search").value !== state.query) $("search").value = state.query;
    return render().then(() => {
      const hits = matches(state.query);
      return hits === null ? [] : listed.map((llm) => llm.llm_id).filter((id) => hits.has(id));
    });
  }
  function showGroup(category) {
    state.group = category === undefined ? null : category;
    return render();
  }
  function labels() {
    return {named: state.named, numbered: state.numbered, total: llms.length};
  }

  // --- controls ---
  function syncControls() {
    $("projection").value = state.projection;
    const share = kept[state.projection];
    // what the axes are: neither has a unit; nearness on the map is what it shows
    const axes = /t-SNE/i.test(state.projection)
      ? "axes: t-SNE of the LLM embeddings, no unit; it keeps neighbours, not distances"
      : /PCA/i.test(state.projection)
        ? "axes: the two main directions (PCA) of the 128-d LLM embeddings, no unit"
        : "";
    $("projection-kept").textContent = ((typeof share === "number")
      ? "keeps " + percent(share, 0) + " of each LLM's " + (data.projection_k || 10) +
        " nearest neighbours" : "") + (axes ? ((typeof share === "number") ? "; " : "") + axes : "");
    $("colour-by").value = state.colourBy || "";
    $("labels").checked = state.labels;
    $("portfolio-method").value = state.method || "";
    const sizes = state.method ? portfolioSizes(state.method) : [];
    $("portfolio-size").hidden = !state.method;
    for (const input of [$("portfolio-k-range"), $("portfolio-k")]) {
      input.disabled = !state.method;
      if (sizes.length) { input.min = sizes[0]; input.max = sizes[sizes.length - 1]; }
      if (state.k !== null) input.value = state.k;
    }
  }
  function setupControls() {
    const projection = $("projection");
    for (const name of projections) projection.append(el("option", {value: name}, name));
    projection.hidden = projections.length < 2;
    $("projection-name").textContent = projections.length < 2 ? projections[0] : "";
    $("projection-name").hidden = projections.length >= 2;
    projection.addEventListener("change", () => setProjection(projection.value));
    const colour = $("colour-by");
    for (const field of colourFields) colour.append(el("option", {value: field}, field));
    $("colour-control").hidden = colourFields.length === 0;
    colour.addEventListener("change", () => setColourBy(colour.value || null));
    $("labels").addEventListener("change", (e) => setLabels(e.target.checked));
    const method = $("portfolio-method");
    for (const name of methods) method.append(el("option", {value: name}, name));
    $("portfolio-control").hidden = methods.length === 0;
    method.addEventListener("change", () => portfolio(method.value || null, state.k));
    for (const input of [$("portfolio-k-range"), $("portfolio-k")]) {
      input.addEventListener("input", () => {
        const k = parseInt(input.value, 10);
        if (state.method && Number.isInteger(k) && k > 0) portfolio(state.method, k);
      });
    }
    const box = $("search");
    let typing = null;
    box.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => search(box.value), llms.length > 200 ? 120 : 0);
    });
    box.addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      const hits = matches(box.value);
      const first = hits === null ? null : listed.find((llm) => hits.has(llm.llm_id));
      if (first) { state.query = box.value; highlight(first.llm_id); }
    });
    $("clear").addEventListener("click", () => clear());
    document.addEventListener("keydown", (e) => {
      if (e.key !== "Escape") return;
      if (state.selected !== null) clear();
      else if (state.query) search("");
      else if (state.group !== null) showGroup(null);
    });
    syncControls();
  }

  // A click on a point selects it; a click (not a drag) on empty plot area clears. A zoom or
  // pan re-places the labels for the new view.
  function setupEvents() {
    let down = null, pointClicked = false;
    plot.on("plotly_click", (event) => {
      const point = event.points && event.points.find((p) => typeof p.customdata === "string");
      if (!point) return;
      pointClicked = true;
      highlight(point.customdata);
    });
    plot.on("plotly_relayout", (event) => {
      if (event["xaxis.autorange"] || event["yaxis.autorange"]) {
        state.view = null;
      } else if (Object.keys(event).some((key) => /^[xy]axis\.range/.test(key))) {
        const axes = plot._fullLayout;
        state.view = {x: axes.xaxis.range.slice(), y: axes.yaxis.range.slice()};
      } else {
        return;
      }
      render();
    });
    plot.addEventListener("mousedown", (e) => {
      pointClicked = false;
      const onPlotArea = e.target.classList && e.target.classList.contains("nsewdrag");
      down = onPlotArea ? [e.clientX, e.clientY] : null;
    }, true);
    document.addEventListener("mouseup", (e) => {
      const start = down; down = null;
      if (start === null) return;
      setTimeout(() => {
        const still = Math.hypot(e.clientX - start[0], e.clientY - start[1]) < 4;
        if (still && !pointClicked && state.selected !== null) clear();
      }, 30);
    });
  }

  setupControls();
  render().then(() => {
    setupEvents();
    window.locusAtlas = {ready: true, llmIds: llms.map((llm) => llm.llm_id), projections,
      portfolioMethods: methods, highlight, clear, portfolio, setProjection, setColourBy,
      setLabels, search, showGroup, labels, numberOf: (id) => numberOf.get(id),
      state: () => Object.assign({}, state)};
    document.body.dataset.ready = "1";
  });
})();
