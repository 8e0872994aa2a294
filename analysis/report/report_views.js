/* headprune report: the attention views (head, model, neuron, rollout), spliced into report.js at its
   "@views" line by analysis/report/report.cpp, inside report.js's function: they use its helpers, page and state. */
  // ---------- head view (lines from query tokens on the left to key tokens on the right) ----------
  function tokenGeometry(tokens) {  // n tokens, fs font size, rh row height, tw token column, sw line width, lines x1 -> x2
    var n = tokens.length, long = n > 40, fs = long ? 11 : 12, rh = long ? 14 : 20, tw = textWidth(tokens, fs);
    return { n: n, fs: fs, rh: rh, tw: tw, top: 28, sw: long ? 1.25 : 2, x1: tw + 4, x2: tw + 4 + (long ? 170 : 150) };
  }
  function linesSvg(o) {  // o: {n, g (geometry), mat (uint8 [L][H][n][n]), layer, heads, seg, filter, hover, cls, colour, fade}
    var out = [], n = o.n, nn = n * n, hv = o.hover, g = o.g, f = o.filter, seg = o.seg, ys = [], k;
    for (k = 0; k < n; k++) ys.push(g.top + (k + 0.5) * g.rh);
    o.heads.forEach(function (h) {
      var base = (o.layer * page.heads + h) * nn, fade = o.fade(h), op = [];
      var pre = '<line class="' + o.cls + '" data-head="' + h + '" data-from="', tail = '" stroke="' + o.colour(h) + '" stroke-opacity="';
      for (k = 0; k < 256; k++) op.push(tail + (k / 255 * fade).toFixed(3) + '"/>');
      for (var i = 0; i < n; i++) {
        if (hv && hv.side === 'from' && hv.i !== i) continue;
        var row = base + i * n, mid = '" x1="' + g.x1 + '" y1="' + ys[i] + '" x2="' + g.x2 + '" y2="', s = pre + i + '" data-to="';
        for (var j = 0; j < n; j++) {
          var q = o.mat[row + j];
          if (q < MIN_Q || (hv && hv.side === 'to' && hv.i !== j) || (f !== 'all' && !pairShown(f, seg, i, j))) continue;
          out.push(s + j + mid + ys[j] + op[q]);
        }
      }
    });
    return out.join('');
  }
  function tokensSvg(ex, g, side, hv) {
    var out = [], from = side === 'from', x = from ? g.x1 - 6 : g.x2 + 6;
    ex.tokens.forEach(function (t, i) {
      var y = g.top + i * g.rh, act = hv && hv.side === side && hv.i === i;
      out.push('<g class="token' + (act ? ' active' : '') + '" data-side="' + side + '" data-index="' + i + '">',
        '<rect class="token-hit" x="' + (from ? 0 : g.x2 + 2) + '" y="' + y + '" width="' + (g.tw + 2) +
        '" height="' + g.rh + '" fill="transparent"/>',
        svgText(x, y + g.rh / 2 + g.fs * 0.35, t, 'font-size="' + g.fs + '" text-anchor="' + (from ? 'end' : 'start') +
          '" fill="' + (ex.segments && ex.segments[i] ? '#8a4b08' : '#222') + '"'), '</g>');
    });
    return out.join('');
  }
  function headLineOptions(view, ex, g) {  // the original draws its pruned heads first, grey and fainter
    var layer = state.headLayer, heads = range(page.heads).filter(function (h) { return !state.hiddenHeads[h]; });
    var greyed = function (h) { return !view.slim && isPruned(layer, h); };
    if (!view.slim) heads.sort(function (a, b) { return (isPruned(layer, b) ? 1 : 0) - (isPruned(layer, a) ? 1 : 0); });
    return { n: g.n, g: g, mat: view.slim ? view.decoded.slimAttn : view.decoded.attn, layer: layer, heads: heads,
             seg: ex.segments || [], filter: state.pairFilter, hover: state.hover, cls: 'attn-line',
             colour: function (h) { return greyed(h) ? GREY : headColour(h); },
             fade: function (h) { return greyed(h) ? 0.6 : 1; } };
  }
  function drawHeadView(view) {
    var ex = currentExample(), g = tokenGeometry(ex.tokens), w = g.x2 + 6 + g.tw, h = g.top + g.n * g.rh + 6;
    view.geometry = g;
    if (view.slim && !view.decoded.slimAttn) { setSvg(view.svg, 0, 0, ''); return; }  // the note says why
    var title = svgText(w / 2, 16, view.title + ' \u00b7 layer ' + state.headLayer, 'font-size="13" font-weight="bold" text-anchor="middle"');
    var layer = state.headLayer, gone = view.slim && range(page.heads).every(function (k) { return isPruned(layer, k); });
    if (gone) {  // nothing to draw between the columns: say why there, not leave them blank
      var cx = (g.x1 + g.x2) / 2, cy = g.top + g.n * g.rh / 2, a = 'font-size="11" text-anchor="middle" fill="#7a1f1c"';
      title += '<g class="hv-empty">' + svgText(cx, cy - 3, 'every head of layer ' + layer, a) + svgText(cx, cy + 11, 'removed: no attention', a) + '</g>';
    }
    setSvg(view.svg, w, h, title +
      '<g class="hv-lines" stroke-width="' + g.sw + '">' + linesSvg(headLineOptions(view, ex, g)) + '</g>' +
      '<g class="hv-tokens">' + tokensSvg(ex, g, 'from', state.hover) + tokensSvg(ex, g, 'to', state.hover) + '</g>');
  }
  function updateLines(view) {  // redraws only the lines and the hovered token (hover, pair filter)
    if (view.slim && !view.decoded.slimAttn) return;
    view.svg.querySelector('.hv-lines').innerHTML = linesSvg(headLineOptions(view, currentExample(), view.geometry));
    view.svg.querySelectorAll('.token').forEach(function (t) {
      t.classList.toggle('active', !!state.hover && state.hover.side === t.dataset.side && state.hover.i === +t.dataset.index);
    });
  }
  function updateAllLines() {
    ui.headViews.forEach(function (view) { guard(view.wrap, function () { updateLines(view); }); });
  }
  function setHover(hv) {
    clearTimeout(state.hoverTimer);
    if (hv === state.hover || (hv && state.hover && hv.side === state.hover.side && hv.i === state.hover.i)) return;
    state.hover = hv; updateAllLines();
  }
  function watchHover(view) {
    view.svg.addEventListener('mouseover', function (e) {
      var t = e.target.closest && e.target.closest('.token');
      if (t) setHover({ side: t.dataset.side, i: +t.dataset.index });
    });
    view.svg.addEventListener('mouseout', function () {
      clearTimeout(state.hoverTimer); state.hoverTimer = setTimeout(function () { setHover(null); }, 40);
    });
  }
  function drawSwatches() {
    var layer = state.headLayer, box = ui.swatches;
    box.textContent = ''; el('span', { 'class': 'hp-label' }, box, 'heads');
    for (var h = 0; h < page.heads; h++) {
      var pr = isPruned(layer, h);
      var s = el('span', { 'class': 'head-swatch' + (pr ? ' pruned' : '') + (state.hiddenHeads[h] ? ' off' : ''), 'data-head': h,
        role: 'button', tabindex: '0', title: 'head ' + h + (pr ? ' (removed in the slimmed model)' : '') + ': click to toggle' }, box, String(h));
      if (!pr) s.style.background = headColour(h);
    }
    [['heads-all', 'all', false], ['heads-none', 'none', true]].forEach(function (b) {
      el('button', { type: 'button', 'class': b[0] }, box, b[1]).onclick = function () { setHiddenHeads(function () { return b[2]; }); };
    });
    if (ui.removedHeads) {
      var rm = range(page.heads).filter(function (h) { return isPruned(layer, h); });
      ui.removedHeads.textContent = rm.length ? 'removed in layer ' + layer + ': head' + (rm.length > 1 ? 's ' : ' ') + rm.join(', ')
                                              : 'no head removed in layer ' + layer;
    }
  }
  function setHiddenHeads(hidden) {
    for (var h = 0; h < page.heads; h++) state.hiddenHeads[h] = hidden(h);
    redrawHeads();
  }
  function redrawHeads() {
    guard(ui.headViewRow, drawSwatches);
    ui.headViews.forEach(function (view) { guard(view.wrap, function () { drawHeadView(view); }); });
  }
  // ---------- model view ----------
  function thumbUrl(dec, mat, l, h, n) {
    var key = l * page.heads + h; if (dec.thumbs[key]) return dec.thumbs[key];
    var c = doc.createElement('canvas'); c.width = c.height = n;
    var ctx = c.getContext('2d'), img = ctx.createImageData(n, n), d = img.data, base = key * n * n;
    for (var k = 0; k < n * n; k++) {
      var t = mat[base + k] / 255;
      d[4 * k] = 255 - t * (255 - HEAT[0]); d[4 * k + 1] = 255 - t * (255 - HEAT[1]);
      d[4 * k + 2] = 255 - t * (255 - HEAT[2]); d[4 * k + 3] = 255;
    }
    ctx.putImageData(img, 0, 0); return (dec.thumbs[key] = c.toDataURL('image/png'));
  }
  function thumbSvg(dec, l, h, n, x, y, T) {
    var pr = isPruned(l, h), sel = state.zoom && state.zoom[0] === l && state.zoom[1] === h;
    return '<g class="thumb' + (pr ? ' pruned' : '') + (sel ? ' selected' : '') + '" data-layer="' + l + '" data-head="' + h +
      '" transform="translate(' + x + ',' + y + ')"><title>layer ' + l + ' head ' + h + (pr ? ' (removed in the slimmed model)' : '') + '</title>' +
      '<image href="' + thumbUrl(dec, dec.attn, l, h, n) + '" width="' + T + '" height="' + T +
      '" preserveAspectRatio="none" image-rendering="pixelated"' + (pr ? ' opacity="0.3"' : '') + '/>' +
      '<rect width="' + T + '" height="' + T + '" fill="none" stroke="' + (sel ? '#000' : pr ? GREY : headColour(h)) +
      '" stroke-width="' + (sel ? 2.5 : 1) + '"/>' +
      (pr ? svgText(T / 2, T / 2 + 4, 'pruned', 'font-size="10" text-anchor="middle" fill="#444"') : '') + '</g>';
  }
  function drawModelView(dec) {
    var n = currentExample().tokens.length, T = 56, gap = 6, left = 34, top = 20, out = [];
    for (var h = 0; h < page.heads; h++) out.push(svgText(left + h * (T + gap) + T / 2, 13, 'h' + h, 'font-size="10" text-anchor="middle" fill="#555"'));
    for (var l = 0; l < page.layers; l++) {
      var y = top + l * (T + gap);
      out.push(svgText(left - 6, y + T / 2 + 4, 'L' + l, 'font-size="10" text-anchor="end" fill="#555"'));
      for (h = 0; h < page.heads; h++) out.push(thumbSvg(dec, l, h, n, left + h * (T + gap), y, T));
    }
    setSvg(ui.modelView.svg, left + page.heads * (T + gap), top + page.layers * (T + gap), out.join(''));
  }
  function drawZoom(dec) {
    ui.zoomBox.textContent = '';
    if (!state.zoom) { note(ui.zoomBox, 'Click a thumbnail to enlarge it.'); return; }
    var l = state.zoom[0], h = state.zoom[1], ex = currentExample(), g = tokenGeometry(ex.tokens), w = g.x2 + 6 + g.tw;
    var fz = figure(ui.zoomBox, 'fig-model-view-zoom', 'Layer ' + l + ', head ' + h +
      (isPruned(l, h) ? ' (removed in the slimmed model)' : '') + ': query tokens (left) to key tokens (right), opacity = attention.');
    var o = { n: g.n, g: g, mat: dec.attn, layer: l, heads: [h], seg: ex.segments || [], filter: 'all', hover: null,
              cls: 'zoom-line', colour: function () { return headColour(h); }, fade: function () { return 1; } };
    setSvg(fz.svg, w, g.top + g.n * g.rh + 6, svgText(w / 2, 16, 'layer ' + l + ' \u00b7 head ' + h, 'font-size="13" font-weight="bold" text-anchor="middle"') +
      '<g stroke-width="' + g.sw + '">' + linesSvg(o) + '</g>' + tokensSvg(ex, g, 'from') + tokensSvg(ex, g, 'to'));
  }
  // ---------- neuron view ----------
  function neuronVectors(dec, ex, l, h, i) {  // query i's q, each k_j and q⊙k_j, q·k_j/√Dh, softmax; colour scales
    var n = ex.tokens.length, DH = page.headDim, sc = ex.qk_scale[l][h], qk = dec.qk, base = (l * page.heads + h) * 2 * n * DH;
    var q = [], K = [], QK = [], scores = [], kmax = 1e-12, pmax = 1e-12, d, j;
    for (d = 0; d < DH; d++) { q.push(qk[base + i * DH + d] * sc); kmax = Math.max(kmax, Math.abs(q[d])); }
    for (j = 0; j < n; j++) {
      var k = [], e = [], s = 0;
      for (d = 0; d < DH; d++) {
        k.push(qk[base + (n + j) * DH + d] * sc); e.push(q[d] * k[d]); s += e[d];
        kmax = Math.max(kmax, Math.abs(k[d])); pmax = Math.max(pmax, Math.abs(e[d]));
      }
      K.push(k); QK.push(e); scores.push(s / Math.sqrt(DH));
    }
    var mx = Math.max.apply(null, scores), exps = scores.map(function (s) { return Math.exp(s - mx); });
    var z = exps.reduce(function (a, b) { return a + b; }, 0), soft = exps.map(function (v) { return v / z; });
    return { q: q, keys: K, products: QK, scores: scores, softmax: soft, kmax: kmax, pmax: pmax };
  }
  function drawNeuron(dec) {
    var ex = currentExample(), n = ex.tokens.length, l = state.neuronLayer, h = state.neuronHead, DH = page.headDim;
    ui.neuronView.fig.querySelectorAll('p.note').forEach(function (p) { p.remove(); });
    if (!dec.qk || !ex.qk_scale) { setSvg(ui.neuronView.svg, 10, 10, ''); note(ui.neuronView.fig, 'This example has no query/key vectors.'); return; }
    var i = Math.min(state.neuronQuery, n - 1), v = neuronVectors(dec, ex, l, h, i);
    var g = tokenGeometry(ex.tokens), rh = g.rh, fs = g.fs, cw = Math.max(2, Math.min(10, Math.floor(192 / DH))), vw = cw * DH;
    var top = 44, xq = g.tw + 8, xk = xq + vw + 14, xe = xk + vw + 14, xs = xe + vw + 14, xp = xs + 62, xa = xp + 104, xt = xa + 108;
    var out = [], cellH = rh - 4;
    function signed(value, m) { return ramp(Math.abs(value) / m, value >= 0 ? POS : NEG); }  // blue >= 0, orange < 0
    function cells(x, y, vec, m) {
      for (var d = 0; d < vec.length; d++)
        out.push('<rect x="' + (x + d * cw) + '" y="' + y + '" width="' + cw + '" height="' + cellH + '" fill="' + signed(vec[d], m) + '"/>');
    }
    function matrix(x, rows, m) {  // one pixelated image per column of vectors (n x Dh cells) instead of n*Dh rects
      var c = doc.createElement('canvas'), ctx = c.getContext('2d'); c.width = vw; c.height = n * rh;
      rows.forEach(function (vec, r) {
        for (var d = 0; d < DH; d++) { ctx.fillStyle = signed(vec[d], m); ctx.fillRect(d * cw, r * rh + 2, cw, cellH); }
      });
      out.push('<image x="' + x + '" y="' + top + '" width="' + vw + '" height="' + n * rh + '" href="' + c.toDataURL('image/png') + '" image-rendering="pixelated"/>');
    }
    function head(x, s, anchor) { out.push(svgText(x, top - 10, s, 'font-size="11" font-weight="bold"' + (anchor ? ' text-anchor="' + anchor + '"' : ''))); }
    out.push(svgText(0, 14, 'layer ' + l + ', head ' + h + (isPruned(l, h) ? ' (removed in the slimmed model)' : '') + ': query "' + ex.tokens[i] + '" (' + i + ')', 'font-size="13" font-weight="bold"'));
    head(g.tw, 'query', 'end'); head(xq, 'q'); head(xk, 'k'); head(xe, 'q \u2299 k'); head(xs, 'q\u00b7k/\u221aD'); head(xp, 'softmax'); head(xa, 'attention'); head(xt, 'key');
    for (var j = 0; j < n; j++) {
      var y0 = top + j * rh, ty = y0 + rh / 2 + fs * 0.35, tk = escapeXml(ex.tokens[j]), score = v.scores[j];
      out.push('<g class="query-token' + (j === i ? ' active' : '') + '" data-index="' + j + '"><rect x="0" y="' + y0 + '" width="' + g.tw + '" height="' + rh +
        '" fill="' + (j === i ? '#dde7f5' : 'transparent') + '"/><text x="' + (g.tw - 4) + '" y="' + ty + '" font-size="' + fs + '" text-anchor="end">' + tk + '</text></g>');
      if (j === i) cells(xq, y0 + 2, v.q, v.kmax);
      out.push(svgText(xs + 50, ty, score.toFixed(2), 'font-size="' + fs + '" text-anchor="end" fill="' + (score >= 0 ? '#1f5f99' : '#b35900') + '"'));
      var pa = dec.attn[(l * page.heads + h) * n * n + i * n + j] / 255;
      [[xp, v.softmax[j], '#4a7ab5'], [xa, pa, '#777']].forEach(function (b) {
        out.push('<rect x="' + b[0] + '" y="' + (y0 + 3) + '" width="' + (b[1] * 56).toFixed(1) + '" height="' + (rh - 6) + '" fill="' + b[2] + '"/>',
          svgText(b[0] + 60, ty, b[1].toFixed(3), 'font-size="' + (fs - 1) + '" fill="#333"'));
      });
      out.push(svgText(xt, ty, ex.tokens[j], 'font-size="' + fs + '"'));
    }
    matrix(xk, v.keys, v.kmax); matrix(xe, v.products, v.pmax);
    setSvg(ui.neuronView.svg, xt + g.tw, top + n * rh + 6, out.join(''));
  }
  // ---------- rollout ----------
  function heatmap(f, tokens, mat, title) {
    var n = tokens.length, c = n <= 24 ? Math.min(24, Math.floor(300 / n)) : Math.max(3, Math.floor(384 / n)), fs = Math.min(11, Math.max(8, c));
    var step = Math.max(1, Math.ceil(fs / c)), tw = textWidth(tokens, fs), left = tw + 2, top = tw + 36, out = [], mx = 1e-9;
    for (var k = 0; k < n * n; k++) mx = Math.max(mx, mat[k]);
    out.push(svgText(left, 14, title, 'font-size="12" font-weight="bold"'),
      svgText(left, 28, 'white = 0, darkest = ' + mx.toFixed(3) + ' (the largest value)', 'font-size="10" fill="#555"'));
    for (var i = 0; i < n; i++) {
      if (i % step === 0) {
        out.push(svgText(left - 4, top + (i + 0.5) * c + fs * 0.35, tokens[i], 'font-size="' + fs + '" text-anchor="end"'));
        var x = left + (i + 0.5) * c + fs * 0.35;
        out.push(svgText(x, top - 4, tokens[i], 'font-size="' + fs + '" transform="rotate(-90 ' + x + ' ' + (top - 4) + ')"'));
      }
      // runs of cells with the same colour (64 levels) become one rect; white cells are left out
      for (var j = 0, run = 0, start = 0; j <= n; j++) {
        var b = j < n ? Math.max(0, Math.min(64, Math.round(mat[i * n + j] / mx * 64))) : -1; if (b === run) continue;
        if (run > 0) out.push('<rect x="' + (left + start * c) + '" y="' + (top + i * c) + '" width="' + (j - start) * c + '" height="' + c + '" fill="' + ramp(run / 64, HEAT) + '"/>');
        run = b; start = j;
      }
    }
    out.push('<rect x="' + left + '" y="' + top + '" width="' + n * c + '" height="' + n * c + '" fill="none" stroke="#999"/>');
    var w = Math.max(left + n * c + 4, left + Math.max(textWidth([title], 12, true), textWidth(['white = 0, darkest = 0.000 (the largest value)'], 10)));
    setSvg(f.svg, w, top + n * c + 4, out.join(''));
  }
  function meanHeads(mat, l, n, heads) {
    var m = new Float32Array(n * n);
    heads.forEach(function (h) {
      for (var b = (l * page.heads + h) * n * n, k = 0; k < n * n; k++) m[k] += mat[b + k] / 255 / heads.length;
    });
    return m;
  }
  function keptHeads(mat, l, n) {  // the heads with attention: a head the model does not have is stored as zeros
    return range(page.heads).filter(function (h) {
      for (var k = (l * page.heads + h) * n * n, e = k + n * n; k < e; k++) if (mat[k]) return true;
      return false;
    });
  }
  function toUnit(u) { var f = new Float32Array(u.length); for (var k = 0; k < u.length; k++) f[k] = u[k] / 255; return f; }
  function drawRollout(dec) {
    var ex = currentExample(), n = ex.tokens.length, l = state.rolloutLayer, body = ui.rollout.body; body.textContent = '';
    var rows = [['original', dec.attn, dec.rollout, keptHeads(dec.attn, l, n)]];
    if (page.data.has_slim) rows.push(['slimmed', dec.slimAttn, dec.slimRollout, dec.slimAttn ? keptHeads(dec.slimAttn, l, n) : []]);
    var cls = [];  // [model, row of [CLS] in its rollout]
    rows.forEach(function (r, k) {
      var row = el('div', { 'class': 'hp-row' }, body), sfx = k ? '-slim' : '';
      if (!r[1] || !r[2]) { note(row, 'No ' + r[0] + ' attention/rollout data for this example.'); return; }
      heatmap(figure(row, 'fig-rollout-raw' + sfx, r[0] + ': attention of layer ' + l + ' averaged over its ' + r[3].length + ' kept head' + (r[3].length === 1 ? '' : 's') + ' (row = query, column = key).'),
        ex.tokens, meanHeads(r[1], l, n, r[3]), r[0] + ' \u00b7 mean attention, layer ' + l);
      var rs = toUnit(r[2].subarray(l * n * n, (l + 1) * n * n));
      heatmap(figure(row, 'fig-rollout' + sfx, r[0] + ': attention rollout through layer ' + l + ' (Abnar & Zuidema 2020, residual included).'),
        ex.tokens, rs, r[0] + ' \u00b7 rollout through layer ' + l);
      cls.push([r[0], rs.subarray(0, n)]);
    });
    if (cls.length) drawClsBars(body, ex.tokens, cls, l);
  }
  function drawClsBars(parent, tokens, cls, l) {
    var n = tokens.length, fc = figure(parent, 'fig-rollout-cls', 'Token relevance: row of [CLS] (token 0) in the rollout through layer ' + l +
      '. Bars share one scale, set by the largest value outside [CLS]; longer bars are clipped and labelled.');
    var bw = Math.max(9, Math.min(24, Math.floor(900 / n))), BH = 60, fs = Math.min(11, bw), tw = textWidth(tokens, fs), left = 64, out = [];
    var m = 1e-9;  // the largest value outside [CLS]
    cls.forEach(function (c) { for (var j = n > 1 ? 1 : 0; j < n; j++) m = Math.max(m, c[1][j]); });
    cls.forEach(function (c, k) {
      var y = 32 + k * (BH + 14);
      out.push(svgText(left - 6, y + BH, c[0], 'font-size="11" text-anchor="end" fill="#555"'),
        '<line x1="' + left + '" x2="' + (left + n * bw) + '" y1="' + (y + BH) + '" y2="' + (y + BH) + '" stroke="#999"/>');
      for (var j = 0; j < n; j++) {
        var v = c[1][j], hgt = Math.min(1, v / m) * BH;
        out.push('<rect class="relevance" data-index="' + j + '" x="' + (left + j * bw + 1) + '" y="' + (y + BH - hgt).toFixed(1) + '" width="' + (bw - 2) +
          '" height="' + hgt.toFixed(1) + '" fill="' + (k ? '#e08a2c' : '#2f6db0') + '"><title>' + escapeXml(tokens[j]) + ': ' + v.toFixed(3) + '</title></rect>');
        if (v > m * 1.0001) out.push(svgText(left + j * bw + 1, y - 2, v.toFixed(2) + ' \u2191', 'font-size="9" fill="#333"'));
      }
    });
    var yb = 32 + cls.length * (BH + 14) + 4;
    tokens.forEach(function (t, j) {
      var x = left + (j + 0.5) * bw + fs * 0.35;
      out.push(svgText(x, yb, t, 'font-size="' + fs + '" text-anchor="end" transform="rotate(-90 ' + x + ' ' + yb + ')"'));
    });
    setSvg(fc.svg, left + n * bw + 8, yb + tw + 4, svgText(left, 13, '[CLS] row of the rollout, layer ' + l, 'font-size="12" font-weight="bold"') + out.join(''));
  }
