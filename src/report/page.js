// The report page's script (inlined by src/report/html.rs). It draws figures only when their <details> opens:
// a head's card (from the grid, any head link #L{l}H{h}, or its own toggle) or the model-wide heatmaps. Each
// such <details class="lazy"> names a JSON block of the page (data-block) and its key there (data-figures),
// under which are its figures as JSON (src/report/spec.rs, Spec::page_json), drawn here as SVG with the same
// layout as src/report/figures.rs. It also sorts tables (click a column header of a table of
// class "sortable") and prints a heatmap cell's value range under the pointer. No network, no other file.
(function () {
  "use strict";
  var FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif";
  var WIDTH = 380, PLOT_H = 180, TOP = 30, LEFT = 58, BELOW = 42, CAPTION_LINE = 13;
  var SERIES = ["#0072B2", "#E69F00", "#009E73", "#CC79A7"];
  var STOPS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129],
    [92, 200, 99], [170, 220, 50], [253, 231, 37]];
  var specs = new WeakMap();

  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  // A number for an SVG attribute: at most two decimals, no trailing zeros (svg.rs `num`).
  function num(v) {
    if (!isFinite(v)) v = 0;
    var s = v.toFixed(2).replace(/0+$/, "").replace(/\.$/, "");
    return s === "-0" ? "0" : s;
  }
  // A tick label (svg.rs `tick_label`).
  function tick(v) {
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (!(a >= 1e-3 && a < 1e4)) return v.toExponential(0).replace("+", "");
    return v.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
  }
  // About n round values covering [lo, hi] (svg.rs `nice_ticks`).
  function niceTicks(lo, hi, n) {
    if (!(isFinite(lo) && isFinite(hi)) || hi <= lo || n === 0) return [lo];
    var raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = 10 * mag;
    var ms = [1, 2, 5, 10];
    for (var i = 0; i < ms.length; i++) {
      if (ms[i] * mag >= raw) { step = ms[i] * mag; break; }
    }
    var out = [], first = Math.ceil(lo / step), last = Math.floor(hi / step + 1e-9);
    for (var k = first; k <= last; k++) out.push(k * step);
    return out;
  }
  function numericTicks(lo, hi, n) {
    return niceTicks(lo, hi, n).map(function (v) { return [v, tick(v)]; });
  }
  function viridis(t) {
    t = isFinite(t) ? Math.min(1, Math.max(0, t)) : 0;
    var f = t * (STOPS.length - 1), i = Math.min(Math.floor(f), STOPS.length - 2), u = f - i;
    return [0, 1, 2].map(function (k) { return Math.round(STOPS[i][k] + (STOPS[i + 1][k] - STOPS[i][k]) * u); });
  }
  function hex(c) {
    return "#" + c.map(function (x) { return (x < 16 ? "0" : "") + x.toString(16); }).join("");
  }
  // Position in [0, 1] of v on a scale from lo to hi (svg.rs `Scale::unit`).
  function unit(scale, v, lo, hi) {
    if (scale === "sqrt") { v = Math.sqrt(Math.max(v, 0)); lo = Math.sqrt(Math.max(lo, 0)); hi = Math.sqrt(Math.max(hi, 0)); }
    return hi > lo ? Math.min(1, Math.max(0, (v - lo) / (hi - lo))) : 0;
  }
  // The value at position u of the scale (the inverse of `unit`).
  function valueAt(scale, u, lo, hi) {
    if (scale === "sqrt") {
      var a = Math.sqrt(Math.max(lo, 0)), b = Math.sqrt(Math.max(hi, 0)), s = a + u * (b - a);
      return s * s;
    }
    return lo + u * (hi - lo);
  }

  function Svg(w, h) { this.w = w; this.h = h; this.body = []; }
  Svg.prototype.rect = function (x, y, w, h, fill, title) {
    this.body.push('<rect x="' + num(x) + '" y="' + num(y) + '" width="' + num(w) + '" height="' + num(h) +
      '" fill="' + fill + '">' + (title ? "<title>" + esc(title) + "</title>" : "") + "</rect>");
  };
  Svg.prototype.frame = function (x, y, w, h, stroke) {
    this.body.push('<rect x="' + num(x) + '" y="' + num(y) + '" width="' + num(w) + '" height="' + num(h) +
      '" fill="none" stroke="' + stroke + '"/>');
  };
  Svg.prototype.line = function (x1, y1, x2, y2, stroke, dash) {
    this.body.push('<line x1="' + num(x1) + '" y1="' + num(y1) + '" x2="' + num(x2) + '" y2="' + num(y2) +
      '" stroke="' + stroke + '"' + (dash ? ' stroke-dasharray="4 3"' : "") + "/>");
  };
  Svg.prototype.polyline = function (points, stroke) {
    this.body.push('<polyline points="' + points.map(function (p) { return num(p[0]) + "," + num(p[1]); }).join(" ") +
      '" fill="none" stroke="' + stroke + '" stroke-width="1.5"/>');
  };
  Svg.prototype.dot = function (x, y, r, fill, title) {
    this.body.push('<circle cx="' + num(x) + '" cy="' + num(y) + '" r="' + num(r) + '" fill="' + fill +
      '" stroke="#333" stroke-width="0.5"><title>' + esc(title) + "</title></circle>");
  };
  Svg.prototype.text = function (x, y, s, size, anchor, rotate, bold) {
    this.body.push('<text x="' + num(x) + '" y="' + num(y) + '" font-size="' + num(size) + '" text-anchor="' + anchor +
      '"' + (rotate ? ' transform="rotate(-90 ' + num(x) + " " + num(y) + ')"' : "") +
      (bold ? ' font-weight="bold"' : "") + ">" + esc(s) + "</text>");
  };
  Svg.prototype.image = function (x, y, w, h, uri) {
    this.body.push('<image class="raster" x="' + num(x) + '" y="' + num(y) + '" width="' + num(w) + '" height="' + num(h) +
      '" preserveAspectRatio="none" style="image-rendering:pixelated" href="' + uri + '"/>');
  };
  Svg.prototype.finish = function () {
    var w = num(this.w), h = num(this.h);
    return '<svg width="' + w + '" height="' + h + '" viewBox="0 0 ' + w + " " + h + '" font-family="' + FONT +
      '"><rect width="' + w + '" height="' + h + '" fill="white"/>' + this.body.join("") + "</svg>";
  };

  function Plot(x, y, w, h) { this.x = x; this.y = y; this.w = w; this.h = h; this.xr = [0, 1]; this.yr = [0, 1]; }
  Plot.prototype.px = function (v) {
    var span = this.xr[1] > this.xr[0] ? this.xr[1] - this.xr[0] : 1;
    return this.x + (v - this.xr[0]) / span * this.w;
  };
  Plot.prototype.py = function (v) {
    var span = this.yr[1] > this.yr[0] ? this.yr[1] - this.yr[0] : 1;
    return this.y + this.h - (v - this.yr[0]) / span * this.h;
  };
  Plot.prototype.axes = function (svg, xticks, yticks, xlabel, ylabel) {
    var self = this, bottom = this.y + this.h;
    svg.frame(this.x, this.y, this.w, this.h, "#444");
    xticks.forEach(function (t) {
      var x = self.px(t[0]);
      svg.line(x, bottom, x, bottom + 4, "#444");
      svg.text(x, bottom + 15, t[1], 10, "middle");
    });
    yticks.forEach(function (t) {
      var y = self.py(t[0]);
      svg.line(self.x - 4, y, self.x, y, "#444");
      svg.text(self.x - 6, y + 3.5, t[1], 10, "end");
    });
    svg.text(this.x + this.w / 2, bottom + 32, xlabel, 11, "middle");
    svg.text(this.x - 42, this.y + this.h / 2, ylabel, 11, "middle", true);
  };

  // A document with room for the caption, and its plot box (figures.rs `canvas`).
  function canvas(f, right) {
    var height = TOP + PLOT_H + BELOW + CAPTION_LINE * f.caption.length + 6, svg = new Svg(WIDTH, height);
    svg.text(WIDTH / 2, 18, f.title, 13, "middle");
    f.caption.forEach(function (line, k) {
      svg.text(8, TOP + PLOT_H + BELOW + CAPTION_LINE * (k + 1), line, 10, "start");
    });
    return [svg, new Plot(LEFT, TOP, WIDTH - LEFT - right, PLOT_H)];
  }
  function legendMargin(series) { return series.length > 1 ? 72 : 12; }
  function legend(svg, plot, series) {
    if (series.length < 2) return;
    series.forEach(function (s, k) {
      var y = plot.y + 8 + 14 * k, x = plot.x + plot.w + 8;
      svg.rect(x, y - 7, 10, 8, SERIES[k % SERIES.length]);
      svg.text(x + 14, y, s.name, 10, "start");
    });
  }
  function finite(v) { return v !== null && isFinite(v); }
  function maxOf(series, floor) {
    var m = floor;
    series.forEach(function (s) { s.values.forEach(function (v) { if (finite(v) && v > m) m = v; }); });
    return m;
  }
  function longest(series, empty) {
    return series.reduce(function (n, s) { return Math.max(n, s.values.length); }, empty);
  }

  function bars(f) {
    var c = canvas(f, legendMargin(f.series)), svg = c[0], plot = c[1], n = longest(f.series, 0);
    plot.xr = [-0.5, n - 0.5];
    plot.yr = [0, maxOf(f.series, 0) * 1.08];
    if (plot.yr[1] <= 0) plot.yr[1] = 1;
    var group = plot.w / Math.max(n, 1) * 0.8, width = group / Math.max(f.series.length, 1);
    f.series.forEach(function (s, k) {
      s.values.forEach(function (v, i) {
        if (!finite(v)) return;
        var x = plot.px(i) - group / 2 + width * k, y = plot.py(Math.max(v, 0));
        svg.rect(x, y, width, plot.py(0) - y, SERIES[k % SERIES.length], s.name + " [" + i + "]: " + v);
      });
    });
    plot.axes(svg, f.xticks, numericTicks(plot.yr[0], plot.yr[1], 4), f.x, f.y);
    legend(svg, plot, f.series);
    return svg.finish();
  }

  function lines(f) {
    var c = canvas(f, legendMargin(f.series)), svg = c[0], plot = c[1], n = longest(f.series, 1);
    plot.xr = [0, Math.max(n, 2) - 1];
    var top = maxOf(f.series, f.reference ? f.reference[0] : 0) * 1.08;
    plot.yr = [0, top > 0 ? top : 1];
    if (f.reference) {
      var py = plot.py(f.reference[0]);
      svg.line(plot.x, py, plot.x + plot.w, py, "#888", true);
      svg.text(plot.x + 4, py - 3, f.reference[1], 9, "start");
    }
    f.series.forEach(function (s, k) {
      var colour = SERIES[k % SERIES.length], points = [];
      s.values.forEach(function (v, i) {
        if (finite(v)) points.push([plot.px(i), plot.py(v), i, v]);
      });
      svg.polyline(points, colour);
      points.forEach(function (p) { svg.dot(p[0], p[1], 2, colour, s.name + " at " + p[2] + ": " + p[3]); });
    });
    plot.axes(svg, numericTicks(plot.xr[0], plot.xr[1], 6), numericTicks(plot.yr[0], plot.yr[1], 4), f.x, f.y);
    legend(svg, plot, f.series);
    return svg.finish();
  }

  function decode(b64) {
    var s = atob(b64), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  // Cell codes as a full rows × cols grid (causal maps: cells right of the diagonal hold 0, as in the file).
  function grid(f) {
    var codes = decode(f.codes), cells = new Uint8Array(f.rows * f.cols), k = 0;
    for (var r = 0; r < f.rows; r++) {
      var n = f.causal ? Math.min(r + 1, f.cols) : f.cols;
      for (var c = 0; c < n; c++) cells[r * f.cols + c] = codes[k++];
    }
    return cells;
  }
  function raster(f, cells) {
    var cv = document.createElement("canvas");
    cv.width = f.cols;
    cv.height = f.rows;
    var ctx = cv.getContext("2d"), img = ctx.createImageData(f.cols, f.rows);
    for (var i = 0; i < cells.length; i++) {
      var rgb = viridis(cells[i] / 255);
      img.data[4 * i] = rgb[0];
      img.data[4 * i + 1] = rgb[1];
      img.data[4 * i + 2] = rgb[2];
      img.data[4 * i + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    return cv.toDataURL("image/png");
  }
  // Vertical colour bar with round ticks and, in bold at the top, the map's maximum (svg.rs `colour_bar`).
  function colourBar(svg, x, y, h, f) {
    var steps = 48, step = h / steps;
    for (var k = 0; k < steps; k++) svg.rect(x, y + h - (k + 1) * step, 12, step + 0.3, hex(viridis((k + 0.5) / steps)));
    svg.frame(x, y, 12, h, "#444");
    niceTicks(f.lo, f.hi, 4).forEach(function (v) {
      var ty = y + h - unit(f.scale, v, f.lo, f.hi) * h;
      if (ty - y < 10) return;
      svg.line(x + 12, ty, x + 16, ty, "#444");
      svg.text(x + 18, ty + 3.5, tick(v), 9, "start");
    });
    svg.line(x + 12, y, x + 16, y, "#444");
    svg.text(x + 18, y + 3.5, f.hi_text, 9, "start", false, true);
    svg.text(x + 6, y - 6, f.label, 10, "middle");
  }
  function heatmap(f) {
    var c = canvas(f, 64), svg = c[0], plot = c[1];
    f.cells = grid(f);
    svg.image(plot.x, plot.y, plot.w, plot.h, raster(f, f.cells));
    colourBar(svg, plot.x + plot.w + 12, plot.y, plot.h, f);
    plot.xr = f.x_range;
    plot.yr = [-f.y_range[1], -f.y_range[0]];
    var xticks = f.xticks.length ? f.xticks : numericTicks(f.x_range[0], f.x_range[1], 4), yticks = [];
    if (f.categorical) {
      for (var r = 0; r < f.rows; r += Math.max(Math.ceil(f.rows / 8), 1)) yticks.push([-(f.y_range[0] + r + 0.5), String(r)]);
    } else {
      yticks = niceTicks(f.y_range[0], f.y_range[1], 4).map(function (v) { return [-v, tick(v)]; });
    }
    plot.axes(svg, xticks, yticks, f.x, f.y);
    return svg.finish();
  }

  // `v` to 3 significant digits, rounded down (or up): the ends of a range that holds the true value.
  function bound(v, up) {
    if (v <= 0) return "0";
    var e = Math.floor(Math.log10(v)) - 2, p = Math.pow(10, e), k = (up ? Math.ceil : Math.floor)(v / p * (1 + (up ? -1e-12 : 1e-12)));
    return (k * p).toFixed(Math.max(0, -e));
  }
  // Data values [from, to) of cell `i` of `count` over `range`, as whole positions.
  function span(range, i, count) {
    var step = (range[1] - range[0]) / count;
    return [Math.ceil(range[0] + i * step), Math.ceil(range[0] + (i + 1) * step) - 1];
  }
  function hover(e) {
    var img = e.target, fig = img.closest("figure"), f = fig && specs.get(fig);
    if (!f || !f.cells) return;
    var box = img.getBoundingClientRect();
    var c = Math.floor((e.clientX - box.left) / box.width * f.cols), r = Math.floor((e.clientY - box.top) / box.height * f.rows);
    if (r < 0 || c < 0 || r >= f.rows || c >= f.cols) return;
    var where;
    if (f.categorical) {
      where = f.y + " " + r + ", column " + c;
    } else {
      var q = span(f.y_range, r, f.rows), k = span(f.x_range, c, f.cols);
      where = "query " + q[0] + "–" + q[1] + ", key " + k[0] + "–" + k[1];
    }
    var code = f.cells[r * f.cols + c], text;
    if (f.causal && c > r) {
      text = where + ": future (masked), 0";
    } else {
      var a = valueAt(f.scale, Math.max(0, (code - 0.5) / 255), f.lo, f.hi);
      var b = valueAt(f.scale, Math.min(1, (code + 0.5) / 255), f.lo, f.hi);
      if (f.above && code === 255) text = where + ": at least " + bound(a, false);
      else if (f.below && code === 0) text = where + ": at most " + bound(b, true);
      else text = where + ": between " + bound(a, false) + " and " + bound(b, true);
    }
    fig.querySelector(".hover").textContent = text;
  }

  function figure(f) {
    if (f.kind === "bars") return bars(f);
    if (f.kind === "lines") return lines(f);
    return heatmap(f) + '<p class="hover">point at a cell for its value</p>';
  }

  // The parsed JSON block with this id (parsed when first needed).
  var blocks = {};
  function block(id) {
    if (!(id in blocks)) {
      var el = document.getElementById(id);
      blocks[id] = el ? JSON.parse(el.textContent) : {};
    }
    return blocks[id];
  }
  // Draws the figures of a lazy <details> (once): those its data-block holds under its data-figures key.
  function draw(details) {
    if (details.dataset.drawn || !details.dataset.block) return;
    details.dataset.drawn = "1";
    (block(details.dataset.block)[details.dataset.figures] || []).forEach(function (f) {
      var el = document.getElementById(f.name);
      if (!el) return;
      specs.set(el, f);
      el.innerHTML = figure(f);
    });
  }
  // Opens the card (or lazy <details>) with this id, drawing its figures.
  function open(id) {
    var el = id && document.getElementById(id);
    if (!el) return;
    var d = el.tagName === "DETAILS" ? el : el.querySelector(":scope > details");
    if (d) {
      d.open = true;
      draw(d);
    }
  }

  function cellKey(row, col) {
    var c = row.cells[col];
    if (!c) return "";
    var s = c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim(), n = parseFloat(s);
    return isNaN(n) ? s : n;
  }
  // Sorts the data rows (rows with a <td>) of `th`'s table by its column; again: the other way.
  function sort(th) {
    var table = th.closest("table"), col = th.cellIndex, dir = th.dataset.dir === "asc" ? "desc" : "asc";
    var rows = Array.prototype.filter.call(table.rows, function (r) {
      return Array.prototype.some.call(r.cells, function (c) { return c.tagName === "TD"; });
    });
    if (!rows.length) return;
    Array.prototype.forEach.call(th.parentNode.cells, function (c) { delete c.dataset.dir; });
    th.dataset.dir = dir;
    var anchor = rows[rows.length - 1].nextSibling, parent = rows[rows.length - 1].parentNode;
    rows.map(function (r, i) { return [cellKey(r, col), i, r]; }).sort(function (a, b) {
      var x = a[0], y = b[0];
      if (typeof x !== typeof y) return typeof x === "number" ? -1 : 1; // text ("–") after numbers
      var c = typeof x === "number" ? x - y : x.localeCompare(y);
      return (dir === "asc" ? c : -c) || a[1] - b[1];
    }).forEach(function (k) { parent.insertBefore(k[2], anchor); });
  }

  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.open && d.classList && d.classList.contains("lazy")) draw(d);
  }, true);
  document.addEventListener("click", function (e) {
    var a = e.target.closest("a[href^='#']");
    if (a) open(decodeURIComponent(a.getAttribute("href").slice(1)));
    var th = e.target.closest("table.sortable th");
    if (th && th.parentNode === th.closest("table").rows[0]) sort(th);
  });
  document.addEventListener("mousemove", function (e) {
    if (e.target.classList && e.target.classList.contains("raster")) hover(e);
  });
  window.addEventListener("hashchange", function () { open(decodeURIComponent(location.hash.slice(1))); });
  Array.prototype.forEach.call(document.querySelectorAll("details.lazy[open]"), draw);
  open(decodeURIComponent(location.hash.slice(1)));
})();
