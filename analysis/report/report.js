/* headprune report: interactive attention views (head, model, neuron, rollout) and "save SVG".
   Contract: analysis/report/README.md. Inlined at the end of <body>; no network, no libraries. */
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg', XLINK = 'http://www.w3.org/1999/xlink';
  var FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
  var PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b',
                 '#e377c2', '#17becf', '#bcbd22', '#393b79', '#ad494a', '#637939'];
  var GREY = '#a0a0a0', MIN_Q = 3;
  var doc = document, html = doc.documentElement;
  var D = null, L = 0, H = 0, DH = 0, P = [], cache = {}, measureCtx = null, failed = false;
  var S = { ex: 0, layer: 0, filter: 'all', off: [], hover: null, hoverTimer: 0,
            nLayer: 0, nHead: 0, nQuery: 0, rLayer: 0, zoom: null };
  var U = {};  // UI nodes

  // ---------- small helpers ----------
  function el(tag, attrs, parent, text) {
    var e = doc.createElement(tag);
    for (var k in attrs || {}) if (attrs[k] != null) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }
  function msg(err) { return String(err && err.message ? err.message : err); }
  function fail(where, err) {
    failed = true;
    console.error('headprune report: ' + msg(err), err);
    html.dataset.error = msg(err);
    if (where) el('p', { 'class': 'note error' }, where, 'Could not draw this view: ' + msg(err));
  }
  function guard(where, fn) { try { fn(); } catch (e) { fail(where, e); } }
  function note(parent, text) { return el('p', { 'class': 'note' }, parent, text); }
  function colour(h) { return H <= PALETTE.length ? PALETTE[h] : 'hsl(' + Math.round(h * 360 / H) + ',62%,45%)'; }
  function select(parent, id, label, options, value, onchange) {
    var lab = el('label', { 'for': id }, parent, label + ' ');
    var s = el('select', { id: id }, lab);
    options.forEach(function (o) { el('option', { value: o[0] }, s, o[1]); });
    s.value = String(value);
    s.addEventListener('change', function () { onchange(s.value); });
    return s;
  }
  function range(k) { var a = []; for (var i = 0; i < k; i++) a.push(i); return a; }
  function layerOpts() { return range(L).map(function (l) { return [l, 'layer ' + l]; }); }
  function textWidth(tokens, fs, bold) {
    if (!measureCtx) measureCtx = doc.createElement('canvas').getContext('2d');
    measureCtx.font = (bold ? 'bold ' : '') + fs + 'px ' + FONT;
    var w = 0;
    tokens.forEach(function (t) { w = Math.max(w, measureCtx.measureText(t).width); });
    return Math.ceil(w) + 10;
  }
  function setSvg(svg, w, h, body) {
    svg.setAttribute('width', w); svg.setAttribute('height', h);
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    svg.setAttribute('font-family', FONT);
    svg.innerHTML = body;
  }
  function txt(x, y, s, attrs) {
    return '<text x="' + x + '" y="' + y + '"' + (attrs ? ' ' + attrs : '') + '>' + esc(s) + '</text>';
  }
  // white -> colour ramp; t in [0,1]
  function ramp(t, c) {
    t = Math.max(0, Math.min(1, t));
    return 'rgb(' + Math.round(255 - t * (255 - c[0])) + ',' + Math.round(255 - t * (255 - c[1])) + ',' +
      Math.round(255 - t * (255 - c[2])) + ')';
  }
  var HEAT = [8, 48, 107], POS = [31, 119, 180], NEG = [230, 110, 0];

  // ---------- figures and "save SVG" ----------
  function figure(parent, id, caption) {
    var f = el('figure', { 'class': 'fig', id: id }, parent);
    var svg = doc.createElementNS(NS, 'svg');
    f.appendChild(svg);
    if (caption != null) el('figcaption', null, f, caption);
    addSave(f);
    return { fig: f, svg: svg, cap: f.querySelector('figcaption') };
  }
  function addSave(f) {
    for (var c = f.firstElementChild; c; c = c.nextElementSibling)
      if (c.classList.contains('save-svg')) return;
    var b = el('button', { type: 'button', 'class': 'save-svg', title: 'download this figure as SVG' }, f, 'save SVG');
    b.addEventListener('click', function () { guard(null, function () { saveSvg(f); }); });
  }
  // Computed styles written into the saved file as style attributes, so it does not need report.css.
  // Inherited properties are written only where they differ from the parent's, the others where they
  // differ from a bare element's. In big figures, bare shapes (lines, cells) take their look from their
  // attributes (report.css styles no bare shape), so only text, groups and shapes of classed groups are read.
  var STYLE_PROPS = ['fill', 'fill-opacity', 'stroke', 'stroke-opacity', 'stroke-width', 'stroke-dasharray',
    'font-family', 'font-size', 'font-weight', 'font-style', 'text-anchor', 'dominant-baseline', 'visibility',
    'image-rendering', 'opacity', 'display'];
  var N_INHERITED = 14, SHAPES = /^(line|rect|image|path|circle|ellipse|polyline|polygon|title)$/;
  function saveSvg(f) {
    var src = f.querySelector('svg');
    if (!src) return;
    var clone = src.cloneNode(true), a = src.querySelectorAll('*'), b = clone.querySelectorAll('*');
    var probe = doc.createElementNS(NS, 'svg'), base = {}, seen = new Map(), big = a.length > 4000;
    probe.setAttribute('style', 'position:absolute;width:0;height:0');
    src.parentNode.appendChild(probe);
    function inline(from, to, pv) {
      var tag = from.localName, cs = getComputedStyle(from), ref = base[tag], out = [], vals = [];
      if (!ref) {
        var rcs = getComputedStyle(probe.appendChild(doc.createElementNS(from.namespaceURI || NS, tag)));
        ref = base[tag] = STYLE_PROPS.map(function (k) { return rcs.getPropertyValue(k); });
      }
      STYLE_PROPS.forEach(function (k, i) {
        var v = vals[i] = cs.getPropertyValue(k);
        if (v && (!pv || v !== (i < N_INHERITED ? pv[i] : ref[i]))) out.push(k + ':' + v);
      });
      seen.set(from, vals);
      var own = to && to.getAttribute('style');
      if (to && out.length) to.setAttribute('style', out.join(';') + (own ? ';' + own : ''));
    }
    try {
      inline(src, clone, null);
      for (var i = 0; i < a.length; i++) {
        var e = a[i], par = e.parentNode;
        if (big && SHAPES.test(e.localName) && !(par.matches && par.matches('.token, .query-token, .thumb'))) continue;
        if (!seen.has(par)) inline(par, null, seen.get(par.parentNode) || null);  // a skipped parent: read only
        inline(e, b[i], seen.get(par));
      }
    } finally { probe.remove(); }
    if (!clone.getAttribute('width')) {
      var r = src.getBoundingClientRect();
      clone.setAttribute('width', Math.ceil(r.width)); clone.setAttribute('height', Math.ceil(r.height));
    }
    clone.querySelectorAll('image').forEach(function (im) {
      if (im.getAttribute('href')) im.setAttributeNS(XLINK, 'xlink:href', im.getAttribute('href'));
    });
    var s = new XMLSerializer().serializeToString(clone);
    if (!/^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/.test(s)) s = s.replace(/^<svg/, '<svg xmlns="' + NS + '"');
    var url = URL.createObjectURL(new Blob(['<?xml version="1.0" encoding="UTF-8"?>\n', s], { type: 'image/svg+xml' }));
    var link = el('a', { href: url, download: (f.id || 'figure') + '.svg' }, doc.body);
    link.click(); link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 5000);
  }

  // ---------- data ----------
  function bytes(s) {
    var bin = atob(s), u = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
    return u;
  }
  function inflate(s) {
    var stream = new Blob([bytes(s)]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Response(stream).arrayBuffer().then(function (b) { return new Uint8Array(b); });
  }
  function load(k) {
    if (cache[k]) return cache[k];
    var ex = D.examples[k], n = ex.tokens.length;
    var fields = [['attn', L * H * n * n], ['slim_attn', L * H * n * n], ['rollout', L * n * n],
                  ['slim_rollout', L * n * n], ['qk', L * H * 2 * n * DH]];
    cache[k] = Promise.all(fields.map(function (f) {
      if (!ex[f[0]]) return null;
      return inflate(ex[f[0]]).then(function (u) {
        if (u.length !== f[1]) throw new Error('example ' + k + ': ' + f[0] + ' has ' + u.length + ' values, expected ' + f[1]);
        return u;
      });
    })).then(function (r) {
      if (!r[0]) throw new Error('example ' + k + ' has no attention data');
      return { attn: r[0], slim: r[1], roll: r[2], sroll: r[3], thumbs: {},
               qk: r[4] ? new Int8Array(r[4].buffer, r[4].byteOffset, r[4].length) : null };
    });
    return cache[k];
  }
  function cur() { return D.examples[S.ex]; }
  function twoSegments(ex) { return ex.segments && ex.segments.some(function (s) { return s !== ex.segments[0]; }); }
  function pairOk(f, seg, i, j) {
    if (f === 'all') return true;
    return seg[i] === (f[0] === 'A' ? 0 : 1) && seg[j] === (f[1] === 'A' ? 0 : 1);
  }

  // ---------- head view (lines from query tokens on the left to key tokens on the right) ----------
  function geom(tokens) {
    var n = tokens.length, long = n > 40;
    var fs = long ? 11 : 12, rh = long ? 14 : 20, tw = textWidth(tokens, fs);
    return { n: n, fs: fs, rh: rh, tw: tw, top: 28, sw: long ? 1.25 : 2, x1: tw + 4, x2: tw + 4 + (long ? 170 : 150) };
  }
  function linesSvg(o) {
    var out = [], n = o.n, nn = n * n, hv = o.hover, g = o.g, f = o.filter, seg = o.seg, ys = [], k;
    for (k = 0; k < n; k++) ys.push(g.top + (k + 0.5) * g.rh);
    o.heads.forEach(function (h) {
      var base = (o.layer * H + h) * nn, fade = o.fade(h), op = [];
      var pre = '<line class="' + o.cls + '" data-head="' + h + '" data-from="', tail = '" stroke="' + o.colour(h) + '" stroke-opacity="';
      for (k = 0; k < 256; k++) op.push(tail + (k / 255 * fade).toFixed(3) + '"/>');
      for (var i = 0; i < n; i++) {
        if (hv && hv.side === 'from' && hv.i !== i) continue;
        var row = base + i * n, mid = '" x1="' + g.x1 + '" y1="' + ys[i] + '" x2="' + g.x2 + '" y2="', s = pre + i + '" data-to="';
        for (var j = 0; j < n; j++) {
          var q = o.mat[row + j];
          if (q < MIN_Q || (hv && hv.side === 'to' && hv.i !== j) || (f !== 'all' && !pairOk(f, seg, i, j))) continue;
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
        txt(x, y + g.rh / 2 + g.fs * 0.35, t, 'font-size="' + g.fs + '" text-anchor="' + (from ? 'end' : 'start') +
          '" fill="' + (ex.segments && ex.segments[i] ? '#8a4b08' : '#222') + '"'), '</g>');
    });
    return out.join('');
  }
  function headOpts(v, ex, g) {
    var heads = range(H).filter(function (h) { return !S.off[h]; });
    if (!v.slim) heads.sort(function (a, b) { return (P[S.layer][b] ? 1 : 0) - (P[S.layer][a] ? 1 : 0); });
    return { n: g.n, g: g, mat: v.slim ? v.dec.slim : v.dec.attn, layer: S.layer, heads: heads, seg: ex.segments || [],
             filter: S.filter, hover: S.hover, cls: 'attn-line',
             colour: function (h) { return !v.slim && P[S.layer][h] ? GREY : colour(h); },
             fade: function (h) { return !v.slim && P[S.layer][h] ? 0.6 : 1; } };
  }
  function drawHeadView(v) {
    var ex = cur(), g = geom(ex.tokens), w = g.x2 + 6 + g.tw, h = g.top + g.n * g.rh + 6;
    v.g = g;
    if (v.slim && !v.dec.slim) { setSvg(v.svg, 0, 0, ''); return; }  // the note says why
    setSvg(v.svg, w, h, txt(w / 2, 16, v.title + ' \u00b7 layer ' + S.layer, 'font-size="13" font-weight="bold" text-anchor="middle"') +
      '<g class="hv-lines" stroke-width="' + g.sw + '">' + linesSvg(headOpts(v, ex, g)) + '</g>' +
      '<g class="hv-tokens">' + tokensSvg(ex, g, 'from', S.hover) + tokensSvg(ex, g, 'to', S.hover) + '</g>');
  }
  function updateLines(v) {
    if (v.slim && !v.dec.slim) return;
    v.svg.querySelector('.hv-lines').innerHTML = linesSvg(headOpts(v, cur(), v.g));
    v.svg.querySelectorAll('.token').forEach(function (t) {
      t.classList.toggle('active', !!S.hover && S.hover.side === t.dataset.side && S.hover.i === +t.dataset.index);
    });
  }
  function setHover(hv) {
    clearTimeout(S.hoverTimer);
    var same = hv === S.hover || (hv && S.hover && hv.side === S.hover.side && hv.i === S.hover.i);
    if (same) return;
    S.hover = hv;
    U.views.forEach(function (v) { guard(v.wrap, function () { updateLines(v); }); });
  }
  function hookHover(v) {
    v.svg.addEventListener('mouseover', function (e) {
      var t = e.target.closest && e.target.closest('.token');
      if (t) setHover({ side: t.dataset.side, i: +t.dataset.index });
    });
    v.svg.addEventListener('mouseout', function () {
      clearTimeout(S.hoverTimer);
      S.hoverTimer = setTimeout(function () { setHover(null); }, 40);
    });
  }
  function drawSwatches() {
    U.swatches.textContent = '';
    el('span', { 'class': 'hp-label' }, U.swatches, 'heads');
    for (var h = 0; h < H; h++) {
      var pr = P[S.layer][h];
      var s = el('span', { 'class': 'head-swatch' + (pr ? ' pruned' : '') + (S.off[h] ? ' off' : ''), 'data-head': h,
        role: 'button', tabindex: '0', title: 'head ' + h + (pr ? ' (removed in the slimmed model)' : '') + ': click to toggle' }, U.swatches, String(h));
      if (!pr) s.style.background = colour(h);
    }
    var all = el('button', { type: 'button', 'class': 'heads-all' }, U.swatches, 'all');
    var none = el('button', { type: 'button', 'class': 'heads-none' }, U.swatches, 'none');
    all.onclick = function () { setOff(function () { return false; }); };
    none.onclick = function () { setOff(function () { return true; }); };
    if (U.removed) {
      var rm = range(H).filter(function (h) { return P[S.layer][h]; });
      U.removed.textContent = rm.length ? 'removed in layer ' + S.layer + ': head' + (rm.length > 1 ? 's ' : ' ') + rm.join(', ') : 'no head removed in layer ' + S.layer;
    }
  }
  function setOff(f) {
    for (var h = 0; h < H; h++) S.off[h] = f(h);
    redrawHeads();
  }
  function redrawHeads() {
    guard(U.hvWrap, drawSwatches);
    U.views.forEach(function (v) { guard(v.wrap, function () { drawHeadView(v); }); });
  }

  // ---------- model view ----------
  function thumbUrl(dec, mat, l, h, n) {
    var key = l * H + h;
    if (dec.thumbs[key]) return dec.thumbs[key];
    var c = doc.createElement('canvas');
    c.width = c.height = n;
    var ctx = c.getContext('2d'), img = ctx.createImageData(n, n), d = img.data, base = key * n * n;
    for (var k = 0; k < n * n; k++) {
      var t = mat[base + k] / 255;
      d[4 * k] = 255 - t * (255 - HEAT[0]); d[4 * k + 1] = 255 - t * (255 - HEAT[1]);
      d[4 * k + 2] = 255 - t * (255 - HEAT[2]); d[4 * k + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    return (dec.thumbs[key] = c.toDataURL('image/png'));
  }
  function drawModelView(dec) {
    var ex = cur(), n = ex.tokens.length, T = 56, gap = 6, left = 34, top = 20, out = [];
    for (var h = 0; h < H; h++) out.push(txt(left + h * (T + gap) + T / 2, 13, 'h' + h, 'font-size="10" text-anchor="middle" fill="#555"'));
    for (var l = 0; l < L; l++) {
      var y = top + l * (T + gap);
      out.push(txt(left - 6, y + T / 2 + 4, 'L' + l, 'font-size="10" text-anchor="end" fill="#555"'));
      for (h = 0; h < H; h++) {
        var pr = P[l][h], x = left + h * (T + gap), sel = S.zoom && S.zoom[0] === l && S.zoom[1] === h;
        out.push('<g class="thumb' + (pr ? ' pruned' : '') + (sel ? ' selected' : '') + '" data-layer="' + l + '" data-head="' + h +
          '" transform="translate(' + x + ',' + y + ')"><title>layer ' + l + ' head ' + h + (pr ? ' (removed in the slimmed model)' : '') + '</title>' +
          '<image href="' + thumbUrl(dec, dec.attn, l, h, n) + '" width="' + T + '" height="' + T +
          '" preserveAspectRatio="none" image-rendering="pixelated"' + (pr ? ' opacity="0.3"' : '') + '/>' +
          '<rect width="' + T + '" height="' + T + '" fill="none" stroke="' + (sel ? '#000' : pr ? GREY : colour(h)) +
          '" stroke-width="' + (sel ? 2.5 : 1) + '"/>' +
          (pr ? txt(T / 2, T / 2 + 4, 'pruned', 'font-size="10" text-anchor="middle" fill="#444"') : '') + '</g>');
      }
    }
    setSvg(U.mv.svg, left + H * (T + gap), top + L * (T + gap), out.join(''));
  }
  function drawZoom(dec) {
    U.zoomWrap.textContent = '';
    if (!S.zoom) { note(U.zoomWrap, 'Click a thumbnail to enlarge it.'); return; }
    var l = S.zoom[0], h = S.zoom[1], ex = cur(), g = geom(ex.tokens), w = g.x2 + 6 + g.tw;
    var fz = figure(U.zoomWrap, 'fig-model-view-zoom', 'Layer ' + l + ', head ' + h +
      (P[l][h] ? ' (removed in the slimmed model)' : '') + ': query tokens (left) to key tokens (right), opacity = attention.');
    var o = { n: g.n, g: g, mat: dec.attn, layer: l, heads: [h], seg: ex.segments || [], filter: 'all', hover: null,
              cls: 'zoom-line', colour: function () { return colour(h); }, fade: function () { return 1; } };
    setSvg(fz.svg, w, g.top + g.n * g.rh + 6, txt(w / 2, 16, 'layer ' + l + ' \u00b7 head ' + h, 'font-size="13" font-weight="bold" text-anchor="middle"') +
      '<g stroke-width="' + g.sw + '">' + linesSvg(o) + '</g>' + tokensSvg(ex, g, 'from') + tokensSvg(ex, g, 'to'));
  }

  // ---------- neuron view ----------
  function drawNeuron(dec) {
    var ex = cur(), n = ex.tokens.length, l = S.nLayer, h = S.nHead;
    U.nv.fig.querySelectorAll('p.note').forEach(function (p) { p.remove(); });
    if (!dec.qk || !ex.qk_scale) { setSvg(U.nv.svg, 10, 10, ''); note(U.nv.fig, 'This example has no query/key vectors.'); return; }
    var sc = ex.qk_scale[l][h], i = Math.min(S.nQuery, n - 1), qk = dec.qk, base = (l * H + h) * 2 * n * DH;
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
    var mx = Math.max.apply(null, scores), ex_ = scores.map(function (s) { return Math.exp(s - mx); });
    var z = ex_.reduce(function (a, b) { return a + b; }, 0), soft = ex_.map(function (v) { return v / z; });
    var g = geom(ex.tokens), rh = g.rh, fs = g.fs, cw = Math.max(2, Math.min(10, Math.floor(192 / DH))), vw = cw * DH;
    var top = 44, xq = g.tw + 8, xk = xq + vw + 14, xe = xk + vw + 14, xs = xe + vw + 14, xp = xs + 62, xa = xp + 104, xt = xa + 108;
    var out = [], y0, cellH = rh - 4;
    function cells(x, y, v, m) {
      for (var d = 0; d < v.length; d++)
        out.push('<rect x="' + (x + d * cw) + '" y="' + y + '" width="' + cw + '" height="' + cellH + '" fill="' + ramp(Math.abs(v[d]) / m, v[d] >= 0 ? POS : NEG) + '"/>');
    }
    function matrix(x, rows, m) {  // one pixelated image per column of vectors (n x Dh cells) instead of n*Dh rects
      var c = doc.createElement('canvas'), ctx = c.getContext('2d');
      c.width = vw; c.height = n * rh;
      rows.forEach(function (v, r) {
        for (var d = 0; d < DH; d++) {
          ctx.fillStyle = ramp(Math.abs(v[d]) / m, v[d] >= 0 ? POS : NEG);
          ctx.fillRect(d * cw, r * rh + 2, cw, cellH);
        }
      });
      out.push('<image x="' + x + '" y="' + top + '" width="' + vw + '" height="' + n * rh + '" href="' + c.toDataURL('image/png') + '" image-rendering="pixelated"/>');
    }
    function head(x, s, anchor) { out.push(txt(x, top - 10, s, 'font-size="11" font-weight="bold"' + (anchor ? ' text-anchor="' + anchor + '"' : ''))); }
    out.push(txt(0, 14, 'layer ' + l + ', head ' + h + (P[l][h] ? ' (removed in the slimmed model)' : '') + ': query "' + ex.tokens[i] + '" (' + i + ')', 'font-size="13" font-weight="bold"'));
    head(g.tw, 'query', 'end'); head(xq, 'q'); head(xk, 'k'); head(xe, 'q \u2299 k'); head(xs, 'q\u00b7k/\u221aD'); head(xp, 'softmax'); head(xa, 'attention'); head(xt, 'key');
    for (j = 0; j < n; j++) {
      y0 = top + j * rh;
      var ty = y0 + rh / 2 + fs * 0.35, tk = esc(ex.tokens[j]);
      out.push('<g class="query-token' + (j === i ? ' active' : '') + '" data-index="' + j + '"><rect x="0" y="' + y0 + '" width="' + g.tw + '" height="' + rh +
        '" fill="' + (j === i ? '#dde7f5' : 'transparent') + '"/><text x="' + (g.tw - 4) + '" y="' + ty + '" font-size="' + fs + '" text-anchor="end">' + tk + '</text></g>');
      if (j === i) cells(xq, y0 + 2, q, kmax);
      out.push(txt(xs + 50, ty, scores[j].toFixed(2), 'font-size="' + fs + '" text-anchor="end" fill="' + (scores[j] >= 0 ? '#1f5f99' : '#b35900') + '"'));
      var pa = dec.attn[(l * H + h) * n * n + i * n + j] / 255;
      [[xp, soft[j], '#4a7ab5'], [xa, pa, '#777']].forEach(function (b) {
        out.push('<rect x="' + b[0] + '" y="' + (y0 + 3) + '" width="' + (b[1] * 56).toFixed(1) + '" height="' + (rh - 6) + '" fill="' + b[2] + '"/>',
          txt(b[0] + 60, ty, b[1].toFixed(3), 'font-size="' + (fs - 1) + '" fill="#333"'));
      });
      out.push(txt(xt, ty, ex.tokens[j], 'font-size="' + fs + '"'));
    }
    matrix(xk, K, kmax); matrix(xe, QK, pmax);
    setSvg(U.nv.svg, xt + g.tw, top + n * rh + 6, out.join(''));
  }

  // ---------- rollout ----------
  function heatmap(f, tokens, mat, title) {
    var n = tokens.length, c = n <= 24 ? Math.min(24, Math.floor(300 / n)) : Math.max(3, Math.floor(384 / n)), fs = Math.min(11, Math.max(8, c));
    var step = Math.max(1, Math.ceil(fs / c)), tw = textWidth(tokens, fs), left = tw + 2, top = tw + 36, out = [], mx = 1e-9;
    for (var k = 0; k < n * n; k++) mx = Math.max(mx, mat[k]);
    out.push(txt(left, 14, title, 'font-size="12" font-weight="bold"'),
      txt(left, 28, 'white = 0, darkest = ' + mx.toFixed(3) + ' (the largest value)', 'font-size="10" fill="#555"'));
    for (var i = 0; i < n; i++) {
      if (i % step === 0) {
        out.push(txt(left - 4, top + (i + 0.5) * c + fs * 0.35, tokens[i], 'font-size="' + fs + '" text-anchor="end"'));
        var x = left + (i + 0.5) * c + fs * 0.35;
        out.push(txt(x, top - 4, tokens[i], 'font-size="' + fs + '" transform="rotate(-90 ' + x + ' ' + (top - 4) + ')"'));
      }
      // runs of cells with the same colour (64 levels) become one rect; white cells are left out
      for (var j = 0, run = 0, start = 0; j <= n; j++) {
        var b = j < n ? Math.max(0, Math.min(64, Math.round(mat[i * n + j] / mx * 64))) : -1;
        if (b === run) continue;
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
      var b = (l * H + h) * n * n;
      for (var k = 0; k < n * n; k++) m[k] += mat[b + k] / 255 / heads.length;
    });
    return m;
  }
  function scaled(u) { var f = new Float32Array(u.length); for (var k = 0; k < u.length; k++) f[k] = u[k] / 255; return f; }
  function drawRollout(dec) {
    var ex = cur(), n = ex.tokens.length, l = S.rLayer, R = U.rollout;
    R.body.textContent = '';
    // a head the model does not have is stored as zeros: average over the heads with attention ("kept")
    var kept = function (mat) {
      return range(H).filter(function (h) {
        for (var k = (l * H + h) * n * n, e = k + n * n; k < e; k++) if (mat[k]) return true;
        return false;
      });
    };
    var rows = [['original', dec.attn, dec.roll, kept(dec.attn)]];
    if (D.has_slim) rows.push(['slimmed', dec.slim, dec.sroll, dec.slim ? kept(dec.slim) : []]);
    var cls = [];
    rows.forEach(function (r, k) {
      var row = el('div', { 'class': 'hp-row' }, R.body), sfx = k ? '-slim' : '';
      if (!r[1] || !r[2]) { note(row, 'No ' + r[0] + ' attention/rollout data for this example.'); return; }
      heatmap(figure(row, 'fig-rollout-raw' + sfx, r[0] + ': attention of layer ' + l + ' averaged over its ' + r[3].length + ' kept head' + (r[3].length === 1 ? '' : 's') + ' (row = query, column = key).'),
        ex.tokens, meanHeads(r[1], l, n, r[3]), r[0] + ' \u00b7 mean attention, layer ' + l);
      var rs = scaled(r[2].subarray(l * n * n, (l + 1) * n * n));
      heatmap(figure(row, 'fig-rollout' + sfx, r[0] + ': attention rollout through layer ' + l + ' (Abnar & Zuidema 2020, residual included).'),
        ex.tokens, rs, r[0] + ' \u00b7 rollout through layer ' + l);
      cls.push([r[0], rs.subarray(0, n)]);
    });
    if (!cls.length) return;
    var fc = figure(R.body, 'fig-rollout-cls', 'Token relevance: row of [CLS] (token 0) in the rollout through layer ' + l +
      '. Bars share one scale, set by the largest value outside [CLS]; longer bars are clipped and labelled.');
    var bw = Math.max(9, Math.min(24, Math.floor(900 / n))), BH = 60, fs = Math.min(11, bw), tw = textWidth(ex.tokens, fs), left = 64, out = [];
    var m = 1e-9;
    cls.forEach(function (c) { for (var j = n > 1 ? 1 : 0; j < n; j++) m = Math.max(m, c[1][j]); });
    cls.forEach(function (c, k) {
      var y = 32 + k * (BH + 14);
      out.push(txt(left - 6, y + BH, c[0], 'font-size="11" text-anchor="end" fill="#555"'),
        '<line x1="' + left + '" x2="' + (left + n * bw) + '" y1="' + (y + BH) + '" y2="' + (y + BH) + '" stroke="#999"/>');
      for (var j = 0; j < n; j++) {
        var v = c[1][j], hgt = Math.min(1, v / m) * BH;
        out.push('<rect class="relevance" data-index="' + j + '" x="' + (left + j * bw + 1) + '" y="' + (y + BH - hgt).toFixed(1) + '" width="' + (bw - 2) +
          '" height="' + hgt.toFixed(1) + '" fill="' + (k ? '#e08a2c' : '#2f6db0') + '"><title>' + esc(ex.tokens[j]) + ': ' + v.toFixed(3) + '</title></rect>');
        if (v > m * 1.0001) out.push(txt(left + j * bw + 1, y - 2, v.toFixed(2) + ' \u2191', 'font-size="9" fill="#333"'));
      }
    });
    var yb = 32 + cls.length * (BH + 14) + 4;
    ex.tokens.forEach(function (t, j) {
      var x = left + (j + 0.5) * bw + fs * 0.35;
      out.push(txt(x, yb, t, 'font-size="' + fs + '" text-anchor="end" transform="rotate(-90 ' + x + ' ' + yb + ')"'));
    });
    setSvg(fc.svg, left + n * bw + 8, yb + tw + 4, txt(left, 13, '[CLS] row of the rollout, layer ' + l, 'font-size="12" font-weight="bold"') + out.join(''));
  }

  // ---------- page ----------
  function exampleInfo() {
    var ex = cur(), box = U.info;
    box.textContent = '';
    var p = el('p', { 'class': 'hp-example-meta' }, box);
    el('strong', null, p, ex.name);
    var bits = [ex.tokens.length + ' tokens'];
    if (ex.label != null) bits.push('label: ' + ex.label);
    bits.push('prediction: ' + ex.prediction + (ex.probability != null ? ' (' + Number(ex.probability).toFixed(3) + ')' : ''));
    if (ex.slim_prediction != null)
      bits.push('slimmed: ' + ex.slim_prediction + (ex.slim_probability != null ? ' (' + Number(ex.slim_probability).toFixed(3) + ')' : ''));
    p.appendChild(doc.createTextNode(' \u00b7 ' + bits.join(' \u00b7 ')));
    if (ex.note) note(box, ex.note);
  }
  function buildAttention(ar) {
    var top = el('div', { 'class': 'hp-controls' }, ar);
    U.exSel = select(top, 'example-select', 'Example', D.examples.map(function (e, k) {
      return [k, k + ': ' + e.name + ' (' + e.tokens.length + ' tokens)'];
    }), 0, function (v) { showExample(+v); });
    U.info = el('div', { 'class': 'hp-example-info' }, ar);
    if (D.encoding) el('p', { 'class': 'hp-encoding' }, ar, 'Data: ' + D.encoding);
    U.attnBody = el('div', { 'class': 'hp-attn-body' }, ar);
    if (typeof DecompressionStream === 'undefined') {
      note(U.attnBody, 'This browser has no DecompressionStream, so the attention views cannot be drawn (the static panels are unaffected).');
      return false;
    }
    var b = U.attnBody;
    el('h3', null, b, 'Head view');
    el('p', { 'class': 'hint' }, b, 'Lines go from each query token (left) to the key tokens it attends to (right); opacity = attention, one colour per head. ' +
      'Click a swatch to hide a head; hover a token to see only its lines. Grey = head removed by pruning. Lines with attention below 3/255 are not drawn.');
    var ctl = el('div', { 'class': 'hp-controls' }, b);
    U.layerSel = select(ctl, 'layer-select', 'Layer', layerOpts(), 0, function (v) { S.layer = +v; redrawHeads(); });
    U.pairSel = select(ctl, 'pair-filter', 'Pairs', [['all', 'all'], ['AB', 'A \u2192 B'], ['BA', 'B \u2192 A'], ['AA', 'A \u2192 A'], ['BB', 'B \u2192 B']],
      'all', function (v) { S.filter = v; U.views.forEach(function (w) { guard(w.wrap, function () { updateLines(w); }); }); });
    U.hvWrap = el('div', { 'class': 'hp-row hp-headviews' }, b);
    U.views = [];
    [['head-view', 'original', false], ['head-view-slim', 'slimmed', true]].forEach(function (d) {
      if (d[2] && !D.has_slim) return;
      var wrap = el('div', { id: d[0], 'class': 'hp-view' }, U.hvWrap);
      if (!d[2]) U.swatches = el('div', { 'class': 'hp-swatches' }, wrap);
      else U.removed = el('div', { 'class': 'hp-swatches hp-removed' }, wrap);
      var f = figure(wrap, 'fig-' + d[0], d[2] ? 'Slimmed model: removed heads draw no lines.' : 'Original model.');
      var v = { wrap: wrap, fig: f.fig, svg: f.svg, title: d[1], slim: d[2] };
      hookHover(v);
      U.views.push(v);
    });
    U.swatches.addEventListener('click', function (e) {
      var s = e.target.closest('.head-swatch');
      if (s) { var h = +s.dataset.head; S.off[h] = !S.off[h]; redrawHeads(); }
    });
    U.swatches.addEventListener('keydown', function (e) { if ((e.key === 'Enter' || e.key === ' ') && e.target.classList.contains('head-swatch')) { e.preventDefault(); e.target.click(); } });

    el('h3', null, b, 'Model view');
    el('p', { 'class': 'hint' }, b, 'Every head of the original model as an attention matrix (row = query token, column = key token, darker = more attention). Click one to enlarge it.');
    var mrow = el('div', { 'class': 'hp-row' }, b);
    U.mv = figure(el('div', { id: 'model-view' }, mrow), 'fig-model-view', 'Layers (rows) \u00d7 heads (columns); faded "pruned" = removed in the slimmed model.');
    U.zoomWrap = el('div', { id: 'model-view-zoom' }, mrow);
    U.mv.svg.addEventListener('click', function (e) {
      var t = e.target.closest('.thumb');
      if (!t) return;
      S.zoom = [+t.dataset.layer, +t.dataset.head];
      withData(U.mv.fig, function (dec) { drawModelView(dec); drawZoom(dec); });
    });

    el('h3', null, b, 'Neuron view');
    var nv = el('div', { id: 'neuron-view' }, b);
    var nc = el('div', { 'class': 'hp-controls' }, nv);
    var nDraw = function () { withData(nv, drawNeuron); };
    select(nc, 'neuron-layer', 'Layer', layerOpts(), 0, function (v) { S.nLayer = +v; nDraw(); });
    select(nc, 'neuron-head', 'Head', range(H).map(function (h) { return [h, 'head ' + h]; }), 0, function (v) { S.nHead = +v; nDraw(); });
    U.nv = figure(nv, 'fig-neuron-view', 'Click a query token on the left. For each key token j: k_j, q \u2299 k_j (blue = positive, orange = negative, ' +
      'shade = magnitude), the score q\u00b7k_j/\u221aD (D = ' + DH + '), its softmax over j, and the model\'s stored attention for comparison. ' +
      'q and k are the 8-bit vectors stored in this report (int8 \u00d7 per-head scale), so the softmax only approximates the attention.');
    U.nv.svg.addEventListener('click', function (e) {
      var t = e.target.closest('.query-token');
      if (t) { S.nQuery = +t.dataset.index; nDraw(); }
    });
    return true;
  }
  function buildRollout(rr) {
    var ctl = el('div', { 'class': 'hp-controls' }, rr);
    S.rLayer = L - 1;
    select(ctl, 'rollout-layer', 'Layer', layerOpts(), L - 1, function (v) { S.rLayer = +v; withData(rr, drawRollout); });
    U.rollout = { root: rr, name: el('span', { 'class': 'hp-label' }, ctl), body: el('div', { 'class': 'hp-rollout-body' }, rr) };
  }
  function withData(where, fn) {
    var k = S.ex;
    return load(k).then(function (dec) { if (k === S.ex) guard(where, function () { fn(dec); }); },
      function (e) { fail(where, e); });
  }
  function drawAll(dec) {
    if (U.views) {
      guard(U.hvWrap, function () {
        var two = twoSegments(cur());
        U.pairSel.disabled = !two;
        if (!two) { U.pairSel.value = 'all'; S.filter = 'all'; }
        S.hover = null;
      });
      U.views.forEach(function (v) {
        v.dec = dec;
        if (v.slim && !dec.slim) note(v.wrap, 'No slimmed attention for this example.');
      });
      redrawHeads();
      guard(U.mv.fig, function () { drawModelView(dec); drawZoom(dec); });
      S.nQuery = 0;
      guard(U.nv.fig, function () { drawNeuron(dec); });
    }
    if (U.rollout) guard(U.rollout.root, function () { drawRollout(dec); });
  }
  function showExample(k) {
    S.ex = k; S.zoom = null;
    doc.querySelectorAll('#panel-tree .tree[data-example]').forEach(function (t) { t.hidden = +t.dataset.example !== k; });
    if (U.info) guard(U.info, exampleInfo);
    if (U.rollout) U.rollout.name.textContent = 'example ' + k + ': ' + D.examples[k].name;
    if (U.views) U.views.forEach(function (v) { v.wrap.querySelectorAll('p.note').forEach(function (p) { p.remove(); }); });
    if (!U.views && !U.rollout) return Promise.resolve();
    return load(k).then(function (dec) {
      if (k !== S.ex) return;
      drawAll(dec);
      doc.querySelectorAll('figure.fig').forEach(addSave);
      html.dataset.drawn = String(k);
    }, function (e) {
      fail(U.attnBody || U.rollout.root, e);
      if (U.attnBody && U.rollout) el('p', { 'class': 'note error' }, U.rollout.root, 'Could not draw this view: ' + msg(e));
    });
  }
  function main() {
    doc.querySelectorAll('figure.fig').forEach(addSave);
    var ar = doc.getElementById('attention-root'), rr = doc.getElementById('rollout-root'), node = doc.getElementById('hp-data');
    if (!node) { html.dataset.ready = '1'; return; }
    try {
      D = JSON.parse(node.textContent);
      L = D.layers | 0; H = D.heads | 0; DH = D.head_dim | 0;
      if (!Array.isArray(D.examples)) throw new Error('hp-data has no examples array');
      for (var l = 0; l < L; l++) { P.push([]); for (var h = 0; h < H; h++) P[l].push(false); }
      (D.pruned || []).forEach(function (p) { if (p[0] < L && p[1] < H) P[p[0]][p[1]] = true; });
      for (h = 0; h < H; h++) S.off.push(false);
    } catch (e) {
      fail(ar || rr, new Error('cannot read the report data (#hp-data): ' + msg(e)));
      if (ar && rr) el('p', { 'class': 'note error' }, rr, 'Could not draw this view: the report data cannot be read.');
      return;
    }
    if (!D.examples.length) {
      [ar, rr].forEach(function (r) { if (r) note(r, 'No examples in this report.'); });
      html.dataset.ready = '1';
      return;
    }
    var ok = true;
    if (ar) guard(ar, function () { ok = buildAttention(ar); });
    if (!ok) U.views = null;
    if (rr) {
      if (typeof DecompressionStream === 'undefined') note(rr, 'This browser has no DecompressionStream, so the rollout cannot be drawn.');
      else guard(rr, function () { buildRollout(rr); });
    }
    showExample(0).then(function () { if (!failed) html.dataset.ready = '1'; });
  }
  try { main(); } catch (e) { fail(null, e); }
})();
