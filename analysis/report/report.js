/* headprune report: interactive attention views (head, model, neuron, rollout) and "save SVG".
   Contract: analysis/report/README.md. Inlined at the end of <body>; no network, no libraries. */
(function () {
  'use strict';
  var SVG_NS = 'http://www.w3.org/2000/svg', XLINK_NS = 'http://www.w3.org/1999/xlink';
  var FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
  var PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b',
                 '#e377c2', '#17becf', '#bcbd22', '#393b79', '#ad494a', '#637939'];
  var GREY = '#a0a0a0', MIN_Q = 3;  // pruned heads' colour; attention below MIN_Q / 255 draws no line
  var HEAT = [8, 48, 107], POS = [31, 119, 180], NEG = [230, 110, 0];  // ramp ends: attention, values >= 0, < 0
  var doc = document, html = doc.documentElement;

  var page = {                        // the report's data, read once from #hp-data by readData()
    data: null,                       // the parsed #hp-data object (README: "Data")
    layers: 0, heads: 0, headDim: 0,  // the model's shape
    pruned: [],                       // pruned[layer][head]: the slimmed model removed that head
    decoded: {},                      // example index -> Promise of its inflated arrays (decodeExample)
    failed: false };                  // a view failed: <html data-ready> is never set
  var state = {                       // what the reader picked
    example: 0,                       // index into page.data.examples: every attention view and the trees show it
    headLayer: 0, pairFilter: 'all',  // head view: layer, sentence pairs ('all', 'AB', 'BA', 'AA', 'BB')
    hiddenHeads: [],                  // hiddenHeads[head]: toggled off by its swatch
    hover: null, hoverTimer: 0,       // the hovered token {side: 'from' | 'to', i}; the timer that clears it
    zoom: null,                       // model view: [layer, head] of the enlarged thumbnail
    neuronLayer: 0, neuronHead: 0, neuronQuery: 0, rolloutLayer: 0 };
  // The nodes the views draw into, made by buildAttention and buildRollout (null where not made): headViews holds
  // {wrap, fig, svg, title, slim, decoded, geometry} per model; modelView and neuronView are figures ({fig, svg}).
  var ui = { info: null, attentionBody: null, pairSelect: null, headViewRow: null, headViews: null, swatches: null,
             removedHeads: null, modelView: null, zoomBox: null, neuronView: null, rollout: null /* {root, name, body} */ };
  var measureCtx = null;              // a canvas context measuring text widths (textWidth)
  // ---------- small helpers ----------
  function el(tag, attrs, parent, text) {
    var e = doc.createElement(tag);
    for (var k in attrs || {}) if (attrs[k] != null) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  var XML_ENTITIES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  function escapeXml(s) { return String(s).replace(/[&<>"']/g, function (c) { return XML_ENTITIES[c]; }); }
  function errorText(err) { return String(err && err.message ? err.message : err); }
  function fail(where, err) {
    page.failed = true; console.error('headprune report: ' + errorText(err), err);
    html.dataset.error = errorText(err);
    if (where) el('p', { 'class': 'note error' }, where, 'Could not draw this view: ' + errorText(err));
  }
  function guard(where, fn) { try { fn(); } catch (e) { fail(where, e); } }
  function note(parent, text) { return el('p', { 'class': 'note' }, parent, text); }
  function isPruned(layer, head) { return page.pruned[layer][head]; }
  function headColour(h) { return page.heads <= PALETTE.length ? PALETTE[h] : 'hsl(' + Math.round(h * 360 / page.heads) + ',62%,45%)'; }
  function select(parent, id, label, options, value, onchange) {
    var s = el('select', { id: id }, el('label', { 'for': id }, parent, label + ' '));
    options.forEach(function (o) { el('option', { value: o[0] }, s, o[1]); });
    s.value = String(value); s.addEventListener('change', function () { onchange(s.value); });
    return s;
  }
  function range(k) { var a = []; for (var i = 0; i < k; i++) a.push(i); return a; }
  function layerOptions() { return range(page.layers).map(function (l) { return [l, 'layer ' + l]; }); }
  function textWidth(tokens, fs, bold) {
    if (!measureCtx) measureCtx = doc.createElement('canvas').getContext('2d');
    measureCtx.font = (bold ? 'bold ' : '') + fs + 'px ' + FONT;
    return Math.ceil(tokens.reduce(function (w, t) { return Math.max(w, measureCtx.measureText(t).width); }, 0)) + 10;
  }
  function setSvg(svg, w, h, body) {
    svg.setAttribute('width', w); svg.setAttribute('height', h); svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    svg.setAttribute('font-family', FONT); svg.innerHTML = body;
  }
  function svgText(x, y, s, attrs) {
    return '<text x="' + x + '" y="' + y + '"' + (attrs ? ' ' + attrs : '') + '>' + escapeXml(s) + '</text>';
  }
  function ramp(t, c) {  // white -> colour c = [r, g, b]; t in [0,1]
    t = Math.max(0, Math.min(1, t));
    return 'rgb(' + c.map(function (v) { return Math.round(255 - t * (255 - v)); }).join(',') + ')';
  }
  // ---------- figures and "save SVG" ----------
  function figure(parent, id, caption) {
    var f = el('figure', { 'class': 'fig', id: id }, parent), svg = f.appendChild(doc.createElementNS(SVG_NS, 'svg'));
    if (caption != null) el('figcaption', null, f, caption);
    addSaveButton(f); return { fig: f, svg: svg };
  }
  function addSaveButton(f) {
    if (f.querySelector(':scope > .save-svg')) return;
    var b = el('button', { type: 'button', 'class': 'save-svg', title: 'download this figure as SVG' }, f, 'save SVG');
    b.addEventListener('click', function () { guard(null, function () { saveSvg(f); }); });
  }
  // Computed styles written into the saved file as style attributes, so it does not need report.css. Inherited
  // properties are written only where they differ from the parent's, the others where they differ from a bare element's.
  // In big figures, bare shapes (lines, cells) take their look from their attributes (report.css styles no bare shape),
  // so only text, groups and shapes of classed groups are read.
  var STYLE_PROPS = ['fill', 'fill-opacity', 'stroke', 'stroke-opacity', 'stroke-width', 'stroke-dasharray', 'font-family', 'font-size',
    'font-weight', 'font-style', 'text-anchor', 'dominant-baseline', 'visibility', 'image-rendering', 'opacity', 'display'];
  var N_INHERITED = 14, SHAPES = /^(line|rect|image|path|circle|ellipse|polyline|polygon|title)$/;
  function inlineStyles(src, clone) {  // returns clone
    var a = src.querySelectorAll('*'), b = clone.querySelectorAll('*');
    var probe = doc.createElementNS(SVG_NS, 'svg'), base = {}, seen = new Map(), big = a.length > 4000;
    probe.setAttribute('style', 'position:absolute;width:0;height:0'); src.parentNode.appendChild(probe);
    function inline(from, to, pv) {
      var tag = from.localName, cs = getComputedStyle(from), ref = base[tag], out = [], vals = [];
      if (!ref) {
        var rcs = getComputedStyle(probe.appendChild(doc.createElementNS(from.namespaceURI || SVG_NS, tag)));
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
    return clone;
  }
  function saveSvg(f) {
    var src = f.querySelector('svg'); if (!src) return;
    var clone = inlineStyles(src, src.cloneNode(true));
    if (!clone.getAttribute('width')) {
      var r = src.getBoundingClientRect();
      clone.setAttribute('width', Math.ceil(r.width)); clone.setAttribute('height', Math.ceil(r.height));
    }
    clone.querySelectorAll('image').forEach(function (im) {
      if (im.getAttribute('href')) im.setAttributeNS(XLINK_NS, 'xlink:href', im.getAttribute('href'));
    });
    var s = new XMLSerializer().serializeToString(clone);
    if (!/^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/.test(s)) s = s.replace(/^<svg/, '<svg xmlns="' + SVG_NS + '"');
    var url = URL.createObjectURL(new Blob(['<?xml version="1.0" encoding="UTF-8"?>\n', s], { type: 'image/svg+xml' }));
    var link = el('a', { href: url, download: (f.id || 'figure') + '.svg' }, doc.body);
    link.click(); link.remove(); setTimeout(function () { URL.revokeObjectURL(url); }, 5000);
  }
  // ---------- data ----------
  function base64Bytes(s) {
    var bin = atob(s), u = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
    return u;
  }
  function inflate(s) {
    var stream = new Blob([base64Bytes(s)]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Response(stream).arrayBuffer().then(function (b) { return new Uint8Array(b); });
  }
  function decodeExample(k) {  // k's B64Z arrays, inflated once: Promise of {attn, slimAttn, rollout, slimRollout, qk, thumbs}
    if (page.decoded[k]) return page.decoded[k];
    var ex = page.data.examples[k], n = ex.tokens.length, lhnn = page.layers * page.heads * n * n;
    var fields = [['attn', lhnn], ['slim_attn', lhnn], ['rollout', page.layers * n * n],
                  ['slim_rollout', page.layers * n * n], ['qk', page.layers * page.heads * 2 * n * page.headDim]];
    return (page.decoded[k] = Promise.all(fields.map(function (f) {
      if (!ex[f[0]]) return null;
      return inflate(ex[f[0]]).then(function (u) {
        if (u.length !== f[1]) throw new Error('example ' + k + ': ' + f[0] + ' has ' + u.length + ' values, expected ' + f[1]);
        return u;
      });
    })).then(function (r) {
      if (!r[0]) throw new Error('example ' + k + ' has no attention data');
      return { attn: r[0], slimAttn: r[1], rollout: r[2], slimRollout: r[3], thumbs: {},
               qk: r[4] ? new Int8Array(r[4].buffer, r[4].byteOffset, r[4].length) : null };
    }));
  }
  function currentExample() { return page.data.examples[state.example]; }
  function twoSegments(ex) { return ex.segments && ex.segments.some(function (s) { return s !== ex.segments[0]; }); }
  function pairShown(filter, seg, i, j) {  // 'AB': query token in sentence A, key token in B
    return filter === 'all' || (seg[i] === (filter[0] === 'A' ? 0 : 1) && seg[j] === (filter[1] === 'A' ? 0 : 1));
  }
  // ---------- the attention views: report_views.js, spliced in here by analysis/report/report.cpp ----------
  /* @views */
  // ---------- page ----------
  function exampleInfo() {
    var ex = currentExample(), box = ui.info, bits = [ex.tokens.length + ' tokens'];
    var withProb = function (label, prob) { return label + (prob != null ? ' (' + Number(prob).toFixed(3) + ')' : ''); };
    box.textContent = '';
    var p = el('p', { 'class': 'hp-example-meta' }, box); el('strong', null, p, ex.name);
    if (ex.label != null) bits.push('label: ' + ex.label);
    bits.push('prediction: ' + withProb(ex.prediction, ex.probability));
    if (ex.slim_prediction != null) bits.push('slimmed: ' + withProb(ex.slim_prediction, ex.slim_probability));
    p.appendChild(doc.createTextNode(' \u00b7 ' + bits.join(' \u00b7 ')));
    if (ex.note) note(box, ex.note);
  }
  function buildAttention(root) {  // example picker, head, model and neuron views; false without DecompressionStream
    var top = el('div', { 'class': 'hp-controls' }, root);
    var exampleOptions = page.data.examples.map(function (e, k) { return [k, k + ': ' + e.name + ' (' + e.tokens.length + ' tokens)']; });
    select(top, 'example-select', 'Example', exampleOptions, 0, function (v) { showExample(+v); });
    ui.info = el('div', { 'class': 'hp-example-info' }, root);
    if (page.data.encoding) el('p', { 'class': 'hp-encoding' }, root, 'Data: ' + page.data.encoding);
    ui.attentionBody = el('div', { 'class': 'hp-attn-body' }, root);
    if (typeof DecompressionStream === 'undefined') {
      note(ui.attentionBody, 'This browser has no DecompressionStream, so the attention views cannot be drawn (the static panels are unaffected).');
      return false;
    }
    buildHeadViews(ui.attentionBody); buildModelView(ui.attentionBody); buildNeuronView(ui.attentionBody);
    return true;
  }
  function buildHeadViews(b) {
    el('h3', null, b, 'Head view');
    el('p', { 'class': 'hint' }, b, 'Lines go from each query token (left) to the key tokens it attends to (right); opacity = attention, one colour per head. ' +
      'Click a swatch to hide a head; hover a token to see only its lines. Grey = head removed by pruning. Lines with attention below 3/255 are not drawn.');
    var ctl = el('div', { 'class': 'hp-controls' }, b);
    select(ctl, 'layer-select', 'Layer', layerOptions(), 0, function (v) { state.headLayer = +v; redrawHeads(); });
    ui.pairSelect = select(ctl, 'pair-filter', 'Pairs', [['all', 'all'], ['AB', 'A \u2192 B'], ['BA', 'B \u2192 A'], ['AA', 'A \u2192 A'], ['BB', 'B \u2192 B']],
      'all', function (v) { state.pairFilter = v; updateAllLines(); });
    ui.headViewRow = el('div', { 'class': 'hp-row hp-headviews' }, b); ui.headViews = [];
    [['head-view', 'original', false], ['head-view-slim', 'slimmed', true]].forEach(function (d) {
      if (d[2] && !page.data.has_slim) return;
      var wrap = el('div', { id: d[0], 'class': 'hp-view' }, ui.headViewRow);
      if (!d[2]) ui.swatches = el('div', { 'class': 'hp-swatches' }, wrap);
      else ui.removedHeads = el('div', { 'class': 'hp-swatches hp-removed' }, wrap);
      var f = figure(wrap, 'fig-' + d[0], d[2] ? 'Slimmed model: removed heads draw no lines.' : 'Original model.');
      var view = { wrap: wrap, fig: f.fig, svg: f.svg, title: d[1], slim: d[2] };
      watchHover(view); ui.headViews.push(view);
    });
    ui.swatches.addEventListener('click', function (e) {
      var s = e.target.closest('.head-swatch');
      if (s) { var h = +s.dataset.head; state.hiddenHeads[h] = !state.hiddenHeads[h]; redrawHeads(); }
    });
    ui.swatches.addEventListener('keydown', function (e) { if ((e.key === 'Enter' || e.key === ' ') && e.target.classList.contains('head-swatch')) { e.preventDefault(); e.target.click(); } });
  }
  function buildModelView(b) {
    el('h3', null, b, 'Model view');
    el('p', { 'class': 'hint' }, b, 'Every head of the original model as an attention matrix (row = query token, column = key token, darker = more attention). Click one to enlarge it.');
    var row = el('div', { 'class': 'hp-row' }, b);
    ui.modelView = figure(el('div', { id: 'model-view' }, row), 'fig-model-view', 'Layers (rows) \u00d7 heads (columns); faded "pruned" = removed in the slimmed model.');
    ui.zoomBox = el('div', { id: 'model-view-zoom' }, row);
    ui.modelView.svg.addEventListener('click', function (e) {
      var t = e.target.closest('.thumb'); if (!t) return;
      state.zoom = [+t.dataset.layer, +t.dataset.head];
      withDecoded(ui.modelView.fig, function (dec) { drawModelView(dec); drawZoom(dec); });
    });
  }
  function buildNeuronView(b) {
    el('h3', null, b, 'Neuron view');
    var box = el('div', { id: 'neuron-view' }, b), ctl = el('div', { 'class': 'hp-controls' }, box);
    var draw = function () { withDecoded(box, drawNeuron); };
    select(ctl, 'neuron-layer', 'Layer', layerOptions(), 0, function (v) { state.neuronLayer = +v; draw(); });
    select(ctl, 'neuron-head', 'Head', range(page.heads).map(function (h) { return [h, 'head ' + h]; }), 0, function (v) { state.neuronHead = +v; draw(); });
    ui.neuronView = figure(box, 'fig-neuron-view', 'Click a query token on the left. For each key token j: k_j, q \u2299 k_j (blue = positive, orange = negative, ' +
      'shade = magnitude), the score q\u00b7k_j/\u221aD (D = ' + page.headDim + '), its softmax over j, and the model\'s stored attention for comparison. ' +
      'q and k are the 8-bit vectors stored in this report (int8 \u00d7 per-head scale), so the softmax only approximates the attention.');
    ui.neuronView.svg.addEventListener('click', function (e) {
      var t = e.target.closest('.query-token');
      if (t) { state.neuronQuery = +t.dataset.index; draw(); }
    });
  }
  function buildRollout(root) {
    var ctl = el('div', { 'class': 'hp-controls' }, root), last = state.rolloutLayer = page.layers - 1;
    select(ctl, 'rollout-layer', 'Layer', layerOptions(), last, function (v) { state.rolloutLayer = +v; withDecoded(root, drawRollout); });
    ui.rollout = { root: root, name: el('span', { 'class': 'hp-label' }, ctl), body: el('div', { 'class': 'hp-rollout-body' }, root) };
  }
  function withDecoded(where, fn) {  // fn(the current example's arrays), unless the reader picks another one meanwhile
    var k = state.example;
    return decodeExample(k).then(function (dec) { if (k === state.example) guard(where, function () { fn(dec); }); },
      function (e) { fail(where, e); });
  }
  function drawExample(dec) {
    if (ui.headViews) {
      guard(ui.headViewRow, function () {
        var two = twoSegments(currentExample()); ui.pairSelect.disabled = !two;
        if (!two) { ui.pairSelect.value = 'all'; state.pairFilter = 'all'; }
        state.hover = null;
      });
      ui.headViews.forEach(function (view) {
        view.decoded = dec; if (view.slim && !dec.slimAttn) note(view.wrap, 'No slimmed attention for this example.');
      });
      redrawHeads();
      guard(ui.modelView.fig, function () { drawModelView(dec); drawZoom(dec); });
      state.neuronQuery = 0; guard(ui.neuronView.fig, function () { drawNeuron(dec); });
    }
    if (ui.rollout) guard(ui.rollout.root, function () { drawRollout(dec); });
  }
  function showExample(k) {
    state.example = k; state.zoom = null;
    doc.querySelectorAll('#panel-tree .tree[data-example]').forEach(function (t) { t.hidden = +t.dataset.example !== k; });
    if (ui.info) guard(ui.info, exampleInfo);
    if (ui.rollout) ui.rollout.name.textContent = 'example ' + k + ': ' + page.data.examples[k].name;
    if (ui.headViews) ui.headViews.forEach(function (view) { view.wrap.querySelectorAll('p.note').forEach(function (p) { p.remove(); }); });
    if (!ui.headViews && !ui.rollout) return Promise.resolve();
    return decodeExample(k).then(function (dec) {
      if (k !== state.example) return;
      drawExample(dec); doc.querySelectorAll('figure.fig').forEach(addSaveButton);
      html.dataset.drawn = String(k);
    }, function (e) {
      fail(ui.attentionBody || ui.rollout.root, e);
      if (ui.attentionBody && ui.rollout) el('p', { 'class': 'note error' }, ui.rollout.root, 'Could not draw this view: ' + errorText(e));
    });
  }
  function readData(node) {  // fills page from the #hp-data node; throws if it cannot be read
    var data = page.data = JSON.parse(node.textContent);
    page.layers = data.layers | 0; page.heads = data.heads | 0; page.headDim = data.head_dim | 0;
    if (!Array.isArray(data.examples)) throw new Error('hp-data has no examples array');
    for (var l = 0; l < page.layers; l++) { page.pruned.push([]); for (var h = 0; h < page.heads; h++) page.pruned[l].push(false); }
    (data.pruned || []).forEach(function (p) { if (p[0] < page.layers && p[1] < page.heads) page.pruned[p[0]][p[1]] = true; });
    for (h = 0; h < page.heads; h++) state.hiddenHeads.push(false);
  }
  function main() {
    doc.querySelectorAll('figure.fig').forEach(addSaveButton);
    var ar = doc.getElementById('attention-root'), rr = doc.getElementById('rollout-root'), node = doc.getElementById('hp-data');
    if (!node) { html.dataset.ready = '1'; return; }
    try { readData(node); } catch (e) {
      fail(ar || rr, new Error('cannot read the report data (#hp-data): ' + errorText(e)));
      if (ar && rr) el('p', { 'class': 'note error' }, rr, 'Could not draw this view: the report data cannot be read.');
      return;
    }
    if (!page.data.examples.length) {
      [ar, rr].forEach(function (r) { if (r) note(r, 'No examples in this report.'); });
      html.dataset.ready = '1'; return;
    }
    if (ar) guard(ar, function () { if (!buildAttention(ar)) ui.headViews = null; });
    if (rr) {
      if (typeof DecompressionStream === 'undefined') note(rr, 'This browser has no DecompressionStream, so the rollout cannot be drawn.');
      else guard(rr, function () { buildRollout(rr); });
    }
    showExample(0).then(function () { if (!page.failed) html.dataset.ready = '1'; });
  }
  try { main(); } catch (e) { fail(null, e); }
})();
