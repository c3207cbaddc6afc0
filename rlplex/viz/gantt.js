// Draws the rlplex Gantt chart from the JSON in #rlplex-data into #gantt as SVG.
// Inlined into every HTML file: no library, no network. One or more panels
// (a timeline each, the comparison has two) share one time axis, in seconds
// from each panel's first op. Wheel zooms the time axis around the pointer,
// drag pans, double-click resets; hovering a bar shows the op.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("rlplex-data").textContent);
  // Events travel as [op, step, start, end, critical] with each op described once in
  // p.ops; expand them to the row every drawing and the tooltip read:
  // [op name, label, step, kind, role, state, devices, GB, start, end, critical, colour role].
  D.panels.forEach(function (p) {
    p.events = p.events.map(function (r) {
      var o = p.ops[r[0]];
      return [o[0], o[1], r[1], o[2], o[3], o[4], o[5], o[6], r[2], r[3], r[4], o[7]];
    });
  });
  var NS = "http://www.w3.org/2000/svg";
  var LABEL_W = 200, ROW_H = 18, COPY_H = 7, LANE_GAP = 3, GROUP_H = 15, AXIS_H = 22,
    TITLE_H = 18, PANEL_GAP = 14, RIGHT = 12;
  var root = document.getElementById("gantt");
  var tip = document.getElementById("tip");
  var span = 0;
  D.panels.forEach(function (p) { span = Math.max(span, p.t1 - p.t0); });
  if (span <= 0) span = 1;
  var view = [0, span];
  var width = 800;

  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  var svg = el("svg", {}, root);
  var defs = el("defs", {}, svg);
  // Hatches for transfers: offload "/" and reload "\" over the role colour.
  var fills = {};
  Object.keys(D.colours).forEach(function (role, i) {
    var c = D.colours[role];
    [["offload", "M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2"], ["reload", "M-1,5 l2,2 M0,0 l6,6 M5,-1 l2,2"]]
      .forEach(function (kd) {
        var id = "h" + i + kd[0];
        var pat = el("pattern", { id: id, width: 6, height: 6, patternUnits: "userSpaceOnUse" }, defs);
        el("rect", { width: 6, height: 6, fill: c }, pat);
        el("path", { d: kd[1], stroke: "#fff", "stroke-width": 1.6 }, pat);
        fills[role + "|" + kd[0]] = "url(#" + id + ")";
      });
  });
  el("clipPath", { id: "plot-clip" }, defs).appendChild(
    (function () { var r = document.createElementNS(NS, "rect"); r.id = "plot-clip-rect"; return r; })());

  function fillOf(ev) {
    var kind = ev[3], role = ev[11];
    if (kind === "offload" || kind === "reload") return fills[role + "|" + kind] || "#999";
    return D.colours[role] || "#888";
  }

  // Static geometry: y of every lane, built once.
  var items = [];   // {el, p, s, e, kind}
  var labels = [];  // {el, p, s, e, text}
  var axes = [];    // {g, y0, y1}
  var y = 0;
  var plot = el("g", {}, null);
  D.panels.forEach(function (p, pi) {
    if (D.panels.length > 1 || p.title) {
      var t = el("text", { x: 4, y: y + 13, "class": "panel-title" }, svg);
      t.textContent = p.title;
      y += TITLE_H;
    }
    var axisY = y;
    var axis = el("g", { "class": "axis" }, svg);
    axes.push({ g: axis, y: y, p: p, top: y + AXIS_H });
    y += AXIS_H;
    var laneY = [], laneH = [], group = null, odd = false;
    p.lanes.forEach(function (ln, li) {
      if (ln[1] !== group) {
        group = ln[1];
        var g = el("text", { x: 4, y: y + 11, "class": "group-label" }, svg);
        g.textContent = group;
        y += GROUP_H;
      }
      var h = ln[3] * ROW_H + (ln[2] === "gpu" ? COPY_H + 1 : 0);
      el("rect", { x: 0, y: y - 1, width: "100%", height: h + 2, "class": "lane-bg" + (odd ? " odd" : "") }, svg);
      if (ln[2] === "gpu") {
        el("rect", { x: LABEL_W, y: y + ROW_H + 1, width: "100%", height: COPY_H, "class": "copy-bg" }, svg);
      }
      odd = !odd;
      var lab = el("text", { x: 10, y: y + 13, "class": "lane-label" }, svg);
      lab.textContent = ln[0];
      var u = el("text", { x: LABEL_W - 6, y: y + 13, "class": "lane-util", "text-anchor": "end" }, svg);
      u.textContent = Math.round(ln[4] * 100) + "%";
      laneY.push(y);
      laneH.push(h);
      y += h + LANE_GAP;
    });
    var bottom = y;
    p.bars.forEach(function (b) {
      var ev = p.events[b[2]];
      var copy = b[1] < 0;
      var by = copy ? laneY[b[0]] + ROW_H + 1 : laneY[b[0]] + b[1] * ROW_H + 1;
      var bh = copy ? COPY_H : ROW_H - 2;
      var cls = "bar" + (copy ? " copy" : "") + (ev[10] ? " crit" : "");
      var r = el("rect", { y: by, height: bh, fill: fillOf(ev), "class": cls, "data-e": pi + ":" + b[2] }, plot);
      items.push({ el: r, p: p, s: ev[8], e: ev[9], min: 0.5 });
      if (!copy) {
        var tx = el("text", { y: by + 12, "class": "bar-label" }, plot);
        tx.textContent = ev[1];
        labels.push({ el: tx, p: p, s: ev[8], e: ev[9], n: ev[1].length });
      }
    });
    p.syncs.forEach(function (sy) {
      var ev = p.events[sy[0]];
      var y0 = laneY[sy[1]], y1 = laneY[sy[2]] + laneH[sy[2]];
      var r = el("rect", { y: y0, height: y1 - y0, fill: D.colours[ev[11]] || "#888",
        stroke: D.colours[ev[11]] || "#888", "class": "sync", "data-e": pi + ":" + sy[0] }, plot);
      items.push({ el: r, p: p, s: ev[8], e: ev[9], min: 3 });
    });
    p.steps.forEach(function (st) {
      var l = el("line", { y1: axisY + 14, y2: bottom, "class": "step-line" }, plot);
      var tx = el("text", { y: axisY + AXIS_H + 11, "class": "step-label" }, plot);
      tx.textContent = "step " + st[0];
      items.push({ el: l, p: p, s: st[1], line: true });
      items.push({ el: tx, p: p, s: st[1], text: true });
    });
    y = bottom + PANEL_GAP;
  });
  var clipped = el("g", { "clip-path": "url(#plot-clip)" }, svg);
  clipped.appendChild(plot);
  var height = y;
  svg.setAttribute("height", height);

  function niceStep(range, target) {
    var raw = range / target, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var n = raw / mag;
    return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
  }
  function fmt(t, step) {
    var digits = step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(step)));
    return t.toFixed(digits) + "s";
  }

  function render() {
    width = Math.max(root.clientWidth || 800, 400);
    svg.setAttribute("width", width);
    var cr = document.getElementById("plot-clip-rect");
    cr.setAttribute("x", LABEL_W); cr.setAttribute("y", 0);
    cr.setAttribute("width", width - LABEL_W - RIGHT); cr.setAttribute("height", height);
    var k = (width - LABEL_W - RIGHT) / (view[1] - view[0]);
    function X(p, t) { return LABEL_W + (t - p.t0 - view[0]) * k; }
    items.forEach(function (it) {
      var x = X(it.p, it.s);
      if (it.line) { it.el.setAttribute("x1", x); it.el.setAttribute("x2", x); return; }
      if (it.text) { it.el.setAttribute("x", x + 2); return; }
      var w = Math.max((it.e - it.s) * k, it.min);
      it.el.setAttribute("x", x);
      it.el.setAttribute("width", w);
    });
    labels.forEach(function (lb) {
      var w = (lb.e - lb.s) * k;
      var show = w > lb.n * 6 + 6;
      lb.el.style.display = show ? "" : "none";
      if (show) lb.el.setAttribute("x", Math.max(X(lb.p, lb.s), LABEL_W) + 3);
    });
    var step = niceStep(view[1] - view[0], Math.max(2, Math.floor((width - LABEL_W) / 90)));
    axes.forEach(function (a) {
      while (a.g.firstChild) a.g.removeChild(a.g.firstChild);
      for (var t = Math.ceil(view[0] / step) * step; t <= view[1] + 1e-9; t += step) {
        var x = LABEL_W + (t - view[0]) * k;
        el("line", { x1: x, x2: x, y1: a.y + 14, y2: a.y + AXIS_H }, a.g);
        var tx = el("text", { x: x, y: a.y + 11, "text-anchor": "middle" }, a.g);
        tx.textContent = fmt(t, step);
      }
    });
  }

  function zoom(factor, at) {
    var w = view[1] - view[0];
    var nw = Math.min(Math.max(w * factor, span * 1e-6), span);
    var t = view[0] + (at - view[0]) * (nw / w);
    view = [Math.max(0, t), 0];
    view[0] = Math.min(view[0], span - nw);
    view[1] = view[0] + nw;
    render();
  }
  function timeAt(clientX) {
    var rect = svg.getBoundingClientRect();
    var k = (width - LABEL_W - RIGHT) / (view[1] - view[0]);
    return view[0] + (clientX - rect.left - LABEL_W) / k;
  }
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
      var d = (ev.deltaX || ev.deltaY) / (width - LABEL_W) * (view[1] - view[0]);
      var w = view[1] - view[0];
      view[0] = Math.min(Math.max(0, view[0] + d), span - w); view[1] = view[0] + w;
      render();
    } else {
      zoom(Math.pow(1.0015, ev.deltaY), timeAt(ev.clientX));
    }
  }, { passive: false });
  var drag = null;
  svg.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, v: view.slice() }; svg.classList.add("dragging"); });
  window.addEventListener("mouseup", function () { drag = null; svg.classList.remove("dragging"); });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var k = (width - LABEL_W - RIGHT) / (drag.v[1] - drag.v[0]);
    var w = drag.v[1] - drag.v[0];
    view[0] = Math.min(Math.max(0, drag.v[0] - (ev.clientX - drag.x) / k), span - w);
    view[1] = view[0] + w;
    render();
  });
  svg.addEventListener("dblclick", function () { view = [0, span]; render(); });
  document.getElementById("zoom-in").onclick = function () { zoom(0.5, (view[0] + view[1]) / 2); };
  document.getElementById("zoom-out").onclick = function () { zoom(2, (view[0] + view[1]) / 2); };
  document.getElementById("zoom-reset").onclick = function () { view = [0, span]; render(); };
  document.getElementById("show-crit").onchange = function (ev) {
    root.classList.toggle("hide-crit", !ev.target.checked);
  };

  function gb(x) { return x >= 100 ? x.toFixed(0) : x.toFixed(2); }
  svg.addEventListener("mousemove", function (ev) {
    var key = ev.target.getAttribute && ev.target.getAttribute("data-e");
    if (!key || drag) { tip.style.display = "none"; return; }
    var parts = key.split(":"), p = D.panels[+parts[0]], e = p.events[+parts[1]];
    var name = e[3] === "offload" || e[3] === "reload" ? e[3] + " " + e[4] + "/" + e[5] : e[1];
    var lines = [
      "<b>" + name + "</b> (" + e[3] + ")",
      "step " + e[2] + " · role " + e[4],
      "start " + (e[8] - p.t0).toFixed(3) + " s · duration " + (e[9] - e[8]).toFixed(3) + " s",
      "devices " + (e[6] || "cpu"),
      "moved " + gb(e[7]) + " GB per device",
    ];
    if (e[10]) lines.push("on the critical path");
    tip.innerHTML = lines.join("<br>");
    var rect = root.getBoundingClientRect();
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX - rect.left + 14, width - 260) + "px";
    tip.style.top = (ev.clientY - rect.top + 14) + "px";
  });
  svg.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  window.addEventListener("resize", render);

  render();
  root.setAttribute("data-bars", String(svg.querySelectorAll("rect.bar").length));
  root.setAttribute("data-ready", "1");
})();
