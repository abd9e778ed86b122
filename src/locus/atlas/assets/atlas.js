(function () {
  "use strict";
  const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", ' +
    '"Liberation Sans", Arial, sans-serif';
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948",
    "#9c755f", "#ff9da7", "#17becf", "#8cd17d", "#d37295", "#a0cbe8", "#b6992d", "#499894",
    "#fabfd2", "#86bcb6", "#79706e"];
  const UNKNOWN = "#b8c0cc", SINGLE = "#4e79a7", ACCENT = "#2563eb", PROXY = "#d97706";
  const INK = "#101828", LABEL = "#475467";
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
  const kept = data.projection_kept || {};
  const plot = $("plot"), panel = $("panel");
  const state = {projection: projections[0], colourBy: colourFields[0] || null,
    labels: true, selected: null, method: null, k: null};

  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const nameOf = (llm) => llm.display_name || llm.llm_id;
  const llmById = (id) => llms[indexOf.get(id)];
  const missing = (v) => v === null || v === undefined;
  const percent = (v, digits) => missing(v) ? "–" : (100 * v).toFixed(digits) + "%";
  const fixed = (v) => missing(v) ? "–" : Number(v).toFixed(3);
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

  // Categorical colours per field, stable across projections: numbers in numeric order,
  // strings alphabetically, "unknown" (null) last and grey.
  const categoryCache = new Map();
  const categoryOf = (llm, field) => {
    const v = field === null ? null : llm[field];
    return (v === null || v === undefined || v === "") ? "unknown" : String(v);
  };
  function categories(field) {
    if (categoryCache.has(field)) return categoryCache.get(field);
    const raw = new Map();
    for (const llm of llms) {
      const v = field === null ? null : llm[field];
      if (v !== null && v !== undefined && v !== "") raw.set(String(v), v);
    }
    const order = [...raw.keys()].sort((a, b) => {
      const x = raw.get(a), y = raw.get(b);
      if (typeof x === "number" && typeof y === "number") return x - y;
      return a.localeCompare(b, "en", {numeric: true});
    });
    const colour = new Map(order.map((c, i) => [c, PALETTE[i % PALETTE.length]]));
    if (llms.some((llm) => categoryOf(llm, field) === "unknown")) {
      order.push("unknown");
      colour.set("unknown", field === null ? SINGLE : UNKNOWN);
    }
    const result = {order, colour};
    categoryCache.set(field, result);
    return result;
  }

  // Marker diameter grows with accuracy across the pool's range.
  const accuracies = llms.map((llm) => llm.accuracy).filter((v) => typeof v === "number");
  const lowest = Math.min(...accuracies), highest = Math.max(...accuracies);
  const baseSize = llms.map((llm) => {
    if (typeof llm.accuracy !== "number") return 8;
    return 9 + 17 * (highest > lowest ? (llm.accuracy - lowest) / (highest - lowest) : 0.5);
  });

  const factFields = ["family", "cluster", ...colourFields].filter(
    (f, i, all) => all.indexOf(f) === i && llms.some((llm) => f in llm));
  const hoverTexts = llms.map((llm) => {
    const lines = ["<b>" + esc(nameOf(llm)) + "</b>"];
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

  function linkTrace(from, relations, colour, dash, coords) {
    const x = [], y = [];
    for (const r of relations) {
      x.push(coords[from][0], coords[r.llm_id][0], null);
      y.push(coords[from][1], coords[r.llm_id][1], null);
    }
    return {type: "scatter", mode: "lines", x, y, hoverinfo: "skip", showlegend: false,
      line: {color: colour, width: 1.6, dash}, opacity: 0.7};
  }

  // Labels that never overlap: the highlighted LLMs first (the selection, its neighbours and
  // proxies, portfolio members), then by accuracy; a label is drawn only where its box (its
  // text's width at 11 px, on the plot's size in pixels) clears every label already placed.
  function placedLabels(coords, roles, chosen) {
    const ids = llms.map((llm) => llm.llm_id);
    const xs = ids.map((id) => coords[id][0]), ys = ids.map((id) => coords[id][1]);
    const spanX = Math.max(...xs) - Math.min(...xs) || 1;
    const spanY = Math.max(...ys) - Math.min(...ys) || 1;
    const size = (plot._fullLayout && plot._fullLayout._size) || {w: 900, h: 560};
    // the points span less than the plot (autorange pads each side): measure conservatively
    const width = Math.max(size.w * 0.8, 160), height = Math.max(size.h * 0.8, 120);
    const rank = (llm) => {
      const id = llm.llm_id;
      if (roles !== null && roles.has(id)) return 0;
      if (chosen !== null && chosen.has(id)) return 1;
      return 2;
    };
    const order = [...llms].sort((a, b) => rank(a) - rank(b) ||
      (b.accuracy === null ? -1 : b.accuracy) - (a.accuracy === null ? -1 : a.accuracy));
    const boxes = [], placed = new Set();
    for (const llm of order) {
      const [x, y] = coords[llm.llm_id];
      const cx = (x - Math.min(...xs)) / spanX * width;
      const cy = (Math.max(...ys) - y) / spanY * height;  // pixels grow downwards
      const half = nameOf(llm).length * 3.8 + 4, box = [cx - half, cy - 26, cx + half, cy - 4];
      if (boxes.some((b) => box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3])) {
        continue;
      }
      boxes.push(box); placed.add(llm.llm_id);
    }
    state.labelled = placed.size;
    return placed;
  }

  function traces() {
    const coords = data.projections[state.projection];
    const roles = focusRoles();
    const chosenList = chosenIds();
    const chosen = chosenList === null || !chosenList.length ? null : new Set(chosenList);
    const placed = state.labels ? placedLabels(coords, roles, chosen) : new Set();
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
    const {order, colour} = categories(state.colourBy);
    // The legend gets its own empty traces, so dimmed points never fade a legend symbol.
    if (state.colourBy !== null) {
      for (const category of order) {
        result.push({type: "scatter", mode: "markers", x: [null], y: [null], name: category,
          legendgroup: category, hoverinfo: "skip",
          marker: {color: colour.get(category), size: 10}});
      }
    }
    for (const category of order) {
      const trace = {type: "scatter", mode: state.labels ? "markers+text" : "markers",
        name: category, legendgroup: category, showlegend: false, cliponaxis: false,
        x: [], y: [], text: [], hovertext: [], customdata: [],
        hovertemplate: "%{hovertext}<extra></extra>", textposition: "top center",
        textfont: {size: 11, color: []},
        marker: {color: colour.get(category), size: [], opacity: [], line: {width: [], color: []}}};
      llms.forEach((llm, i) => {
        if (categoryOf(llm, state.colourBy) !== category) return;
        const id = llm.llm_id;
        const inPortfolio = chosen !== null && chosen.has(id);
        const role = roles === null ? undefined : roles.get(id);
        let size = baseSize[i], opacity = 0.88, width = 1, ring = "#ffffff", label = LABEL;
        // Faded points lose their labels, so the highlighted ones stay readable.
        if (chosen !== null && !inPortfolio) { opacity = 0.25; label = null; }
        if (roles !== null && role === undefined) { opacity = 0.12; label = null; }
        if (roles !== null && role !== undefined) { opacity = 1; label = INK; width = 2.5; }
        if (role === "neighbour") ring = ACCENT;
        if (role === "proxy") ring = PROXY;
        // Portfolio members keep their dark ring (fainter when the highlight leaves them out).
        if (inPortfolio) {
          size += 8; width = 3; ring = INK;
          if (role === undefined) { opacity = roles === null ? 1 : 0.45; label = INK; }
        }
        if (role === "self") { size += 5; width = 3.5; ring = INK; }
        trace.x.push(coords[id][0]); trace.y.push(coords[id][1]);
        trace.text.push(state.labels && label !== null && placed.has(id) ? esc(nameOf(llm)) : "");
        trace.hovertext.push(hoverTexts[i]); trace.customdata.push(id);
        trace.textfont.color.push(label || LABEL);
        trace.marker.size.push(size); trace.marker.opacity.push(opacity);
        trace.marker.line.width.push(width); trace.marker.line.color.push(ring);
      });
      result.push(trace);
    }
    return result;
  }

  function layout() {
    const axis = (n) => ({
      title: {text: esc(state.projection) + " " + n, font: {size: 11, color: "#98a2b3"}},
      showticklabels: false, ticks: "", zeroline: false, showgrid: true, gridcolor: "#f0f2f5",
      showline: false});
    return {font: {family: FONT, size: 12, color: "#1d2433"}, paper_bgcolor: "#ffffff",
      plot_bgcolor: "#ffffff", margin: {l: 36, r: 12, t: 18, b: 36}, hovermode: "closest",
      dragmode: "pan", uirevision: state.projection, xaxis: axis(1), yaxis: axis(2),
      hoverlabel: {bgcolor: "#ffffff", bordercolor: "#d0d5dd", align: "left",
        font: {family: FONT, size: 12, color: "#1d2433"}},
      legend: {title: {text: esc(state.colourBy || "")}, bgcolor: "rgba(255,255,255,0.9)",
        itemsizing: "constant", font: {size: 12}}};
  }

  let drawn = false;
  function render() {
    renderPanel();
    const first = !drawn;
    const call = drawn ? Plotly.react : Plotly.newPlot;
    return call(plot, traces(), layout(), CONFIG).then(() => {
      drawn = true;
      // labels are placed for the plot's size in pixels, known once it is drawn
      if (first && state.labels) return Plotly.react(plot, traces(), layout(), CONFIG);
      return undefined;
    });
  }
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (drawn && state.labels) render(); }, 150);
  });

  const colourOf = (llm) => categories(state.colourBy).colour.get(categoryOf(llm, state.colourBy));
  function llmButton(id, role) {
    const llm = llmById(id);
    const swatch = el("span", {class: "swatch",
      style: "background:" + colourOf(llm)});
    return el("button", {type: "button", class: "llm", title: id, dataset: {llmId: id, role},
      onclick: () => highlight(id)}, swatch, nameOf(llm));
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
      if (state.selected === null) {
        box.append(el("p", {class: "hint"}, "Click a point to see its neighbours and proxies."));
      }
      panel.append(box);
    }
    if (state.selected !== null) {
      const llm = llmById(state.selected);
      const box = el("section", {id: "selected", dataset: {llmId: llm.llm_id}});
      box.append(el("h3", {}, "Selected LLM"), el("h2", {}, nameOf(llm)));
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
      panel.append(el("h3", {}, "The pool"),
        el("p", {class: "hint"}, llms.length + " LLMs. Hover over a point for its details; " +
          "click it to highlight its nearest neighbours and proxies and list them here."),
        el("p", {class: "hint"}, "Click empty space, press ", el("kbd", {}, "Esc"),
          " or Clear to reset. Drag to pan, scroll to zoom, double-click to fit."));
      if (methods.length) {
        panel.append(el("p", {class: "hint"}, "Pick a portfolio method above to see which few " +
          "LLMs cover the pool."));
      }
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
    state.projection = name; syncControls(); return render();
  }
  function setColourBy(field) {
    if (field !== null && !colourFields.includes(field)) {
      throw new Error("unknown colouring " + JSON.stringify(field));
    }
    state.colourBy = field; syncControls(); return render();
  }
  function setLabels(on) { state.labels = Boolean(on); syncControls(); return render(); }

  // --- controls ---
  function syncControls() {
    $("projection").value = state.projection;
    const share = kept[state.projection];
    $("projection-kept").textContent = (typeof share === "number")
      ? "keeps " + percent(share, 0) + " of each LLM's " + (data.projection_k || 10) +
        " nearest neighbours" : "";
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
    $("clear").addEventListener("click", () => clear());
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") clear(); });
    const low = accuracies.length ? percent(lowest, 0) : "–";
    const high = accuracies.length ? percent(highest, 0) : "–";
    $("caption").textContent = "Each point is an LLM; nearby points answer the same queries " +
      "alike. Point size: accuracy (mean score; smallest " + low + ", largest " + high + "). " +
      (state.colourBy ? "Colour: the chosen field; grey is unknown." : "");
    syncControls();
  }

  // A click on a point selects it; a click (not a drag) on empty plot area clears.
  function setupClicks() {
    let down = null, pointClicked = false;
    plot.on("plotly_click", (event) => {
      const point = event.points && event.points.find((p) => typeof p.customdata === "string");
      if (!point) return;
      pointClicked = true;
      highlight(point.customdata);
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
    setupClicks();
    window.locusAtlas = {ready: true, llmIds: llms.map((llm) => llm.llm_id), projections,
      portfolioMethods: methods, highlight, clear, portfolio, setProjection, setColourBy,
      setLabels, state: () => Object.assign({}, state)};
    document.body.dataset.ready = "1";
  });
})();
