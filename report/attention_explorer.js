// The attention explorer's script (see attention_explorer.h): reads the
// weights from #attention-data, fills the selects, and draws the selected
// query's weights as bars over the key tokens and the whole block as a matrix.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('attention-data').textContent);
  const byId = (id) => document.getElementById(id);
  const select = { sentence: byId('sentence'), block: byId('block'), layer: byId('layer'), head: byId('head') };
  const names = { encoder_self: 'encoder self-attention', decoder_self: 'decoder self-attention', cross: 'cross-attention' };
  let query = 0;

  // One layer of one block as bytes [heads, queries, keys]; weight = byte / 255.
  const decoded = new Map();
  function layerBytes(s, block, layer) {
    const key = s + '/' + block + '/' + layer;
    if (!decoded.has(key)) {
      const text = atob(data.sentences[s].blocks[block][layer]);
      const bytes = new Uint8Array(text.length);
      for (let i = 0; i < text.length; ++i) bytes[i] = text.charCodeAt(i);
      decoded.set(key, bytes);
    }
    return decoded.get(key);
  }

  // Queries and keys: the encoder attends over the source, the decoder's
  // self-attention over its own inputs, cross-attention from them to the source.
  function tokens(sentence, block) {
    return {
      queries: block === 'encoder_self' ? sentence.source : sentence.target,
      keys: block === 'decoder_self' ? sentence.target : sentence.source,
    };
  }

  // The weights shown, [queries * keys]: one head's, or the mean over heads.
  function weights(s, block, layer, head, size) {
    const bytes = layerBytes(s, block, layer);
    const heads = data.sentences[s].heads;
    const out = new Float32Array(size);
    const chosen = head === 'mean' ? [...Array(heads).keys()] : [Number(head)];
    for (const h of chosen) for (let i = 0; i < size; ++i) out[i] += bytes[h * size + i] / 255 / chosen.length;
    return out;
  }

  function fill(element, values, labels) {
    const previous = element.value;
    element.replaceChildren(...values.map((value, i) => new Option(labels[i], value)));
    if (values.includes(previous)) element.value = previous;
  }

  function tokenSpan(text, index) {
    const span = document.createElement('span');
    span.className = 'token';
    span.dataset.index = index;
    const label = document.createElement('span');
    label.className = 'word';
    label.textContent = text;
    span.append(label);
    return span;
  }

  let view = null;  // what is drawn: tokens and weights of the selection

  function draw() {
    const s = Number(select.sentence.value), block = select.block.value;
    const sentence = data.sentences[s];
    const { queries, keys } = tokens(sentence, block);
    view = { queries, keys, w: weights(s, block, Number(select.layer.value), select.head.value, queries.length * keys.length) };
    query = Math.min(query, queries.length - 1);
    byId('translation').textContent = sentence.text + '  →  ' + sentence.translation;
    byId('queries').replaceChildren(...queries.map((text, i) => {
      const span = tokenSpan(text, i);
      span.tabIndex = 0;
      span.addEventListener('mouseenter', () => choose(i));
      span.addEventListener('focus', () => choose(i));
      span.addEventListener('keydown', (event) => {
        const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
        if (step === undefined) return;
        event.preventDefault();
        const next = byId('queries').children[i + step];
        if (next) next.focus();
      });
      return span;
    }));
    byId('keys').replaceChildren(...keys.map((text, k) => {
      const span = tokenSpan(text, k);
      const bar = document.createElement('span');
      bar.className = 'bar';
      span.prepend(bar);
      return span;
    }));
    const matrix = byId('matrix');
    const head = document.createElement('tr');
    head.append(document.createElement('th'), ...keys.map((text) => {
      const th = document.createElement('th');
      th.textContent = text;
      return th;
    }));
    const rows = queries.map((text, q) => {
      const tr = document.createElement('tr');
      const th = document.createElement('th');
      th.textContent = text;
      tr.append(th);
      for (let k = 0; k < keys.length; ++k) {
        const td = document.createElement('td');
        const w = view.w[q * keys.length + k];
        td.style.background = 'rgba(31, 78, 156, ' + w.toFixed(3) + ')';
        td.title = text + ' → ' + keys[k] + ': ' + w.toFixed(3);
        tr.append(td);
      }
      tr.addEventListener('mouseenter', () => choose(q));
      return tr;
    });
    matrix.replaceChildren(head, ...rows);
    choose(query);
  }

  // Highlights the keys query `q` attends to: every key's bar is its weight,
  // and those with at least half the row's largest weight are marked strong.
  function choose(q) {
    query = q;
    const { queries, keys, w } = view;
    const row = w.subarray(q * keys.length, (q + 1) * keys.length);
    const max = Math.max(...row);
    [...byId('queries').children].forEach((span, i) => span.classList.toggle('selected', i === q));
    [...byId('keys').children].forEach((span, k) => {
      span.dataset.weight = row[k].toFixed(3);
      span.title = row[k].toFixed(3);
      span.classList.toggle('strong', row[k] >= 0.5 * max);
      span.firstChild.style.height = (row[k] * 48).toFixed(1) + 'px';
    });
    [...byId('matrix').rows].forEach((tr, i) => tr.classList.toggle('selected', i === q + 1));
    const head = select.head.value === 'mean' ? 'mean of the heads' : 'head ' + select.head.value;
    byId('explorer-status').textContent = names[select.block.value] + ', layer ' + select.layer.value + ', ' + head +
      ': what "' + queries[q] + '" (query ' + q + ') attends to';
  }

  function sentenceChanged() {
    const sentence = data.sentences[Number(select.sentence.value)];
    const layers = [...Array(sentence.layers).keys()].map(String);
    const heads = [...Array(sentence.heads).keys()].map(String);
    fill(select.layer, layers, layers);
    fill(select.head, ['mean', ...heads], ['mean', ...heads]);
    draw();
  }

  fill(select.sentence, data.sentences.map((_, i) => String(i)), data.sentences.map((s, i) => (i + 1) + ': ' + s.text));
  select.sentence.addEventListener('change', sentenceChanged);
  for (const element of [select.block, select.layer, select.head]) element.addEventListener('change', draw);
  sentenceChanged();
})();
