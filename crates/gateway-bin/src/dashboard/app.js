// The Cairn dashboard. Plain JavaScript, no dependencies.
//
// Rules this file keeps:
// - Every value from the API reaches the page as text (textContent, text
//   nodes, attribute values); no HTML is ever built from strings.
// - The API token lives in sessionStorage and travels only in the
//   Authorization header; it is taken from the URL fragment once and the
//   fragment is removed from the address bar.
// - Polling runs only while the embedding model downloads, loads, a
//   re-embed or a backfill runs, or an import's backfill waits to start.
'use strict';

const TOKEN_KEY = 'cairn.token';
const FACT_PAGE = 200;
const EPISODE_PAGE = 50;
const POLL_MS = 1000;

const state = {
  token: null,
  view: 'memory',
  pane: 'facts',
  facts: [],
  factsShown: 0,
  factSearch: false,
  episodeOffset: 0,
  episodeTotal: 0,
  // The confirmed form of the forget last previewed.
  forgetPreview: null,
  pollTimer: null,
  loaded: new Set(),
  probes: new Map(),
  // Each embedding-status load; an answer of an older one is dropped.
  pollGeneration: 0,
  // The backfill run this page saw running, so its end is shown too.
  watchedBackfill: null,
  // The last import scan: the request it was for and its report.
  importScan: null,
  // The MCP sync or import shown as a dry run, run on Apply.
  mcpPending: null,
  // The skill and the agent whose detail is shown.
  skillShown: null,
  agentShown: null,
};

// ---- small DOM helpers -------------------------------------------------

const $ = (id) => document.getElementById(id);

/** Builds an element; string children become text nodes, never markup. */
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = String(value);
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else if (key === 'data') Object.assign(node.dataset, value);
    else if (typeof value === 'boolean' || typeof value === 'number') node[key] = value;
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function cell(label, content, cls) {
  return el('td', { class: cls, 'data-label': label }, content);
}

function clear(node) {
  node.replaceChildren();
  return node;
}

function say(id, text, kind) {
  const node = $(id);
  node.textContent = text || '';
  node.className = 'message' + (kind ? ' ' + kind : '');
}

function when(ms) {
  if (ms === null || ms === undefined) return '—';
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toLocaleString();
}

function valueText(value) {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function num(value, digits) {
  if (value === null || value === undefined) return '—';
  return typeof value === 'number' ? value.toFixed(digits) : String(value);
}

function bytes(count) {
  if (count === null || count === undefined) return '—';
  if (count < 1024) return count + ' B';
  if (count < 1024 * 1024) return (count / 1024).toFixed(1) + ' KiB';
  return (count / (1024 * 1024)).toFixed(1) + ' MiB';
}

// ---- the API -----------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Requests in flight, mirrored in `<body data-pending>` for scripts that wait on the page. */
let pending = 0;

function track(delta) {
  pending += delta;
  document.body.dataset.pending = String(pending);
}

async function api(method, path, body) {
  track(1);
  try {
    return await request(method, path, body);
  } finally {
    track(-1);
  }
}

async function request(method, path, body) {
  const headers = { Authorization: 'Bearer ' + state.token };
  const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, 'unreachable', 'cairn serve did not answer (' + error.message + '); is it still running?');
  }
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  if (response.status === 401) {
    signOut('The token was refused: it does not match the server.token of the running cairn serve.');
    throw new ApiError(401, 'unauthorized', 'the token was refused');
  }
  if (!response.ok || !data || data.ok === false) {
    const code = data && data.code ? data.code : 'http_' + response.status;
    const message = data && data.error ? data.error : 'the server answered ' + response.status;
    throw new ApiError(response.status, code, message);
  }
  return data;
}

function refusal(error) {
  if (!(error instanceof ApiError)) return String(error);
  if (error.status === 0) return error.message;
  return 'Refused (' + error.code + '): ' + error.message;
}

/** Runs `job`, showing a refusal in message element `id`. */
async function guarded(id, job) {
  try {
    await job();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return;
    say(id, refusal(error), 'error');
  }
}

// ---- sign-in -----------------------------------------------------------

function takeTokenFromFragment() {
  const hash = window.location.hash.replace(/^#/, '');
  if (!hash) return;
  const params = new URLSearchParams(hash);
  const token = params.get('token');
  if (token) sessionStorage.setItem(TOKEN_KEY, token.trim());
  // Keep the token out of the address bar and the history.
  history.replaceState(null, '', window.location.pathname + window.location.search);
}

/** Forgets the token and every value shown; `why` tells the user. */
function signOut(why) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  stopPolling();
  state.loaded.clear();
  state.probes.clear();
  state.watchedBackfill = null;
  state.importScan = null;
  $('import-confirm').hidden = true;
  $('import-ask').hidden = true;
  $('embed-progress').hidden = true;
  $('app').hidden = true;
  $('tabs').hidden = true;
  $('sign-out').hidden = true;
  for (const id of ['fact-list', 'epi-list', 'lesson-list', 'audit-list', 'mem-counts', 'skill-list',
    'agent-list', 'agent-finding-list', 'agent-detail-fields', 'ctx-session-bars', 'ctx-message-bars', 'mcp-list',
    'skill-lint-list', 'import-sources', 'import-item-list', 'pending-list', 'review-list', 'run-list']) {
    clear($(id));
  }
  for (const id of ['ctx-session-text', 'ctx-message-text', 'skill-detail-content', 'embed-status', 'embed-detail',
    'fact-summary', 'epi-summary', 'epi-page', 'mcp-skipped', 'skill-lint-summary', 'import-msg', 'import-ledger',
    'import-more', 'import-confirm-text', 'pending-msg', 'review-msg']) {
    $(id).textContent = '';
  }
  $('login').hidden = false;
  $('login-error').textContent = why || '';
  $('token-input').value = '';
  $('token-input').focus();
}

async function signIn(token) {
  state.token = token;
  try {
    await api('GET', '/api/health');
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) signOut(refusal(error));
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $('login').hidden = true;
  $('login-error').textContent = '';
  $('app').hidden = false;
  $('tabs').hidden = false;
  $('sign-out').hidden = false;
  showView(state.view);
}

// ---- views -------------------------------------------------------------

function showView(view) {
  state.view = view;
  for (const button of document.querySelectorAll('button.tab')) {
    if (button.dataset.view === view) button.setAttribute('aria-current', 'page');
    else button.removeAttribute('aria-current');
  }
  for (const section of document.querySelectorAll('main > .view')) {
    section.hidden = section.id !== 'view-' + view;
  }
  if (view === 'memory') loadMemory();
  else if (view === 'skills') {
    loadSkills();
    loadPending();
    loadReview();
    loadSkillAudit();
  }
  else if (view === 'agents') loadAgents();
  else if (view === 'mcp') loadMcp();
  else if (view === 'context') $('ctx-q').focus();
}

function showPane(pane) {
  state.pane = pane;
  for (const button of document.querySelectorAll('button.subtab')) {
    if (button.dataset.pane === pane) button.setAttribute('aria-current', 'true');
    else button.removeAttribute('aria-current');
  }
  for (const section of document.querySelectorAll('#view-memory > .pane')) {
    section.hidden = section.id !== 'pane-' + pane;
  }
  if (pane === 'episodic' && !state.loaded.has('episodic')) loadEpisodes(0);
  else if (pane === 'lessons') loadLessons();
  else if (pane === 'audit') loadAudit();
  else if (pane === 'forget') $('forget-q').focus();
  else if (pane === 'import') $('import-from').focus();
}

// ---- memory: counts, embedding, settings --------------------------------

async function loadMemory() {
  const first = !state.loaded.has('memory');
  state.loaded.add('memory');
  await Promise.all([
    loadCounts(),
    loadEmbedding(),
    loadSettings(),
    loadScopes(),
    state.factSearch ? Promise.resolve() : loadFacts(),
  ]);
  if (state.pane !== 'facts') showPane(state.pane);
  if (first) {
    // The Memory view has its data on screen once the next frame is drawn.
    requestAnimationFrame(() => performance.mark('cairn-memory-painted'));
  }
}

async function loadCounts() {
  await guarded('fact-msg', async () => {
    const data = await api('GET', '/api/memory/stats');
    const stats = data.stats;
    state.episodeTotal = stats.episodic_live;
    const rows = [
      ['Facts', stats.semantic_live - stats.lessons],
      ['Lessons', stats.lessons],
      ['Episodic fragments', stats.episodic_live],
      ['Audit events', stats.audit_events],
      ['Facts and lessons without a vector', stats.semantic_missing_vectors],
      ['Embedding model', stats.embedding_model],
    ];
    clear($('mem-counts')).append(...rows.flatMap(([name, value]) => [
      el('dt', { text: name }),
      el('dd', { text: value === null || value === undefined ? '—' : value }),
    ]));
    renderEpisodePager();
  });
}

function embeddingBusy(status, imported) {
  const reembed = status.reembed && status.reembed.step;
  return status.setup_step === 'downloading' || status.setup_step === 'loading'
    || reembed === 'applying' || reembed === 'running'
    || (status.backfill && status.backfill.step === 'running')
    || imported.state === 'running';
}

async function loadEmbedding() {
  stopPolling();
  const generation = ++state.pollGeneration;
  let status;
  let imported;
  try {
    const answers = await Promise.all([api('GET', '/api/memory/embedding-status'), api('GET', '/api/import/status')]);
    status = answers[0];
    imported = answers[1].backfill;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) $('embed-status').textContent = refusal(error);
    return;
  }
  if (generation !== state.pollGeneration) return;
  renderEmbedding(status, imported);
  if (embeddingBusy(status, imported) && state.token) {
    state.pollTimer = setTimeout(loadEmbedding, POLL_MS);
  }
}

function stopPolling() {
  if (state.pollTimer !== null) clearTimeout(state.pollTimer);
  state.pollTimer = null;
}

function showProgress(kind, value, max) {
  const progress = $('embed-progress');
  progress.max = Math.max(max, 1);
  progress.value = value;
  progress.dataset.kind = kind;
  progress.hidden = false;
}

/** The episodic backfill's line: while it runs, and once more when the run this page watched ends. */
function backfillDetail(backfill, imported) {
  if (backfill.step === 'running') {
    state.watchedBackfill = backfill.run;
    showProgress('backfill', backfill.done, backfill.total);
    return 'Embedding rows stored without a vector: ' + backfill.done + ' of ' + backfill.total + ' rows.';
  }
  if (imported.state === 'running') return 'Imported rows wait for the embedding model; their backfill starts shortly.';
  if (state.watchedBackfill === null || backfill.run !== state.watchedBackfill) return '';
  if (backfill.step === 'failed') return 'The backfill stopped: ' + (backfill.error || 'unknown error');
  showProgress('backfill', backfill.done, backfill.total);
  return 'Embedded ' + backfill.done + ' of ' + backfill.total + ' rows; '
    + (backfill.remaining ? backfill.remaining + ' still without a vector (the heartbeat tries again).' : 'every row has a vector.');
}

function renderEmbedding(status, imported) {
  const progress = $('embed-progress');
  const reembed = status.reembed || {};
  let text;
  let detail = '';
  progress.hidden = true;
  if (reembed.step === 'applying' || reembed.step === 'running') {
    text = 'Re-embedding every row with the new model…';
    if (reembed.total > 0) {
      showProgress('reembed', reembed.done, reembed.total);
      detail = reembed.done + ' of ' + reembed.total + ' rows';
    }
  } else if (status.setup_step === 'downloading') {
    text = 'Downloading ' + status.model_id + '…';
    if (status.bytes_total) {
      showProgress('download', status.bytes_downloaded, status.bytes_total);
      detail = bytes(status.bytes_downloaded) + ' of ' + bytes(status.bytes_total);
    } else {
      detail = bytes(status.bytes_downloaded) + ' so far';
    }
    if (status.download_attempt > 1) detail += ' (attempt ' + status.download_attempt + ' of ' + status.download_max_attempts + ')';
  } else {
    if (status.setup_step === 'loading') {
      text = 'Loading ' + status.model_id + ' into memory…';
    } else if (status.setup_step === 'done') {
      text = status.model_id + ' is loaded (' + status.model_dim + ' dimensions): search uses vectors and keywords.';
    } else if (status.setup_step === 'error') {
      text = 'The model is not available: search uses keywords only.';
    } else {
      text = 'No model loaded: search uses keywords only.';
    }
    detail = backfillDetail(status.backfill || {}, imported || {});
  }
  if (status.error) detail = (detail ? detail + ' — ' : '') + status.error;
  if (reembed.step === 'failed' && reembed.error) detail = (detail ? detail + ' — ' : '') + 'Re-embed failed: ' + reembed.error;
  $('embed-status').textContent = text;
  $('embed-detail').textContent = detail;
  $('embed-retry').hidden = !status.can_retry;
}

async function loadSettings() {
  await guarded('settings-msg', async () => {
    const data = await api('GET', '/api/memory/settings');
    $('set-idle').value = String(data.settings.history_idle_hours);
    $('set-days').value = String(data.settings.history_max_days);
  });
}

async function saveSettings(event) {
  event.preventDefault();
  const update = {
    history_idle_hours: Number($('set-idle').value),
    history_max_days: Number($('set-days').value),
  };
  say('settings-msg', 'Saving…');
  await guarded('settings-msg', async () => {
    const data = await api('PUT', '/api/memory/settings', update);
    $('set-idle').value = String(data.settings.history_idle_hours);
    $('set-days').value = String(data.settings.history_max_days);
    say('settings-msg', 'Saved to config.json; the running server uses the new values now.', 'ok');
  });
}

// ---- memory: scopes and forget ------------------------------------------

/** The query parameters of the chosen project: one scope, or every scope. */
function scopeParams() {
  const only = $('scope-filter').value;
  return only ? 'only=' + encodeURIComponent(only) : 'all_projects=true';
}

function scopeChip(scope) {
  return el('span', { class: 'chip scope', text: scope || 'global' });
}

async function loadScopes() {
  await guarded('fact-msg', async () => {
    const data = await api('GET', '/api/memory/scopes');
    const select = $('scope-filter');
    const chosen = select.value;
    select.replaceChildren(el('option', { value: '', text: 'All projects and global' }),
      ...data.scopes.map((row) => el('option', {
        value: row.scope,
        text: row.scope + ' (' + row.semantic + ' facts, ' + row.episodic + ' fragments)',
      })));
    if ([...select.options].some((option) => option.value === chosen)) select.value = chosen;
  });
}

function scopeChanged() {
  state.loaded.delete('episodic');
  loadFacts();
  if (state.pane === 'episodic') loadEpisodes(0);
  clear($('forget-list'));
  $('forget-confirm').hidden = true;
}

/** The forget the form describes, in the chosen project; a preview unless `confirm`. */
function forgetBody(confirm) {
  const body = { confirm };
  const q = $('forget-q').value.trim();
  if (q) body.query = q;
  if ($('forget-since').value) body.since = $('forget-since').value;
  if ($('forget-until').value) body.until = $('forget-until').value;
  const only = $('scope-filter').value;
  if (!only) body.scope = 'all';
  else if (only === 'global') body.scope = 'global';
  else {
    body.scope = 'project';
    body.project = only;
  }
  return body;
}

function countWords(counts) {
  return counts.episodic + ' fragments, ' + counts.facts + ' facts, ' + counts.lessons + ' lessons, '
    + counts.transcripts + ' transcript messages, ' + counts.history_entries + ' history entries';
}

async function previewForget(event) {
  event.preventDefault();
  $('forget-confirm').hidden = true;
  await guarded('forget-msg', async () => {
    const data = await api('POST', '/api/memory/forget', forgetBody(false));
    state.forgetPreview = forgetBody(true);
    const items = data.report.items;
    clear($('forget-list')).append(...items.map((item) => el('li', {},
      el('div', { class: 'row-text', text: item.text }),
      el('div', { class: 'row-meta' },
        el('span', { class: 'chip', text: item.layer }),
        scopeChip(item.scope),
        el('span', { text: item.id })))));
    say('forget-msg', items.length === 0 ? 'Nothing matches: nothing would be forgotten.'
      : 'Would forget ' + countWords(data.report.counts) + '. Nothing has changed yet.', items.length ? 'warn' : 'ok');
    $('forget-confirm').hidden = items.length === 0;
  });
}

async function applyForget() {
  const body = state.forgetPreview;
  if (!body) return;
  $('forget-confirm').hidden = true;
  await guarded('forget-msg', async () => {
    const data = await api('POST', '/api/memory/forget', body);
    state.forgetPreview = null;
    clear($('forget-list'));
    say('forget-msg', 'Forgot ' + countWords(data.report.counts) + '.', 'ok');
    state.loaded.delete('episodic');
    await Promise.all([loadFacts(), loadCounts(), loadScopes()]);
  });
}

// ---- memory: facts -----------------------------------------------------

async function loadFacts() {
  await guarded('fact-msg', async () => {
    const data = await api('GET', '/api/memory/semantic?' + scopeParams());
    state.facts = data.entries.filter((entry) => !entry.key.startsWith('lesson.'));
    state.factSearch = false;
    state.factsShown = 0;
    clear($('fact-list'));
    $('fact-summary').textContent = state.facts.length + (state.facts.length === 1 ? ' fact' : ' facts');
    showMoreFacts();
  });
}

function showMoreFacts() {
  const next = state.facts.slice(state.factsShown, state.factsShown + FACT_PAGE);
  $('fact-list').append(...next.map(factRow));
  state.factsShown += next.length;
  const more = $('fact-more');
  more.hidden = state.factsShown >= state.facts.length;
  more.textContent = 'Show more (' + (state.facts.length - state.factsShown) + ' not shown)';
}

function factRow(entry) {
  return el('tr', { data: { key: entry.key, scope: entry.scope } },
    cell('Key', el('code', { text: entry.key })),
    cell('Scope', scopeChip(entry.scope)),
    cell('Value', valueText(entry.value), 'fact-value'),
    cell('Source', entry.source || '—'),
    cell('Confidence', num(entry.confidence, 2), 'num'),
    cell('Updated', entry.updated_at ? when(entry.updated_at) : '—', 'num'),
    cell('', [
      el('button', { type: 'button', class: 'small', text: 'Edit', onclick: () => editFact(entry) }),
      ' ',
      el('button', { type: 'button', class: 'small danger', text: 'Delete', onclick: () => deleteFact(entry.key, entry.scope) }),
    ], 'actions'));
}

function editFact(entry) {
  const isString = typeof entry.value === 'string';
  $('fact-key').value = entry.key;
  $('fact-value').value = valueText(entry.value);
  $('fact-json').checked = !isString;
  if (entry.confidence !== undefined && entry.confidence !== null) $('fact-confidence').value = String(entry.confidence);
  $('fact-value').focus();
}

function skipWords(key, reason) {
  switch (reason && reason.reason) {
    case 'protected_user_explicit':
      return 'Kept the stored value of ' + key + ': the user set it explicitly, and this write is not from the user.';
    case 'lower_confidence':
      return 'Kept the stored value of ' + key + ': its confidence ' + num(reason.existing, 2)
        + ' is more than 0.1 above this write\'s ' + num(reason.attempted, 2) + '.';
    case 'duplicate_lesson':
      return 'An existing lesson already says this (' + reason.existing_key + '); it was kept.';
    case 'existing_wins':
      return 'Kept the stored entry ' + reason.existing_key + ': existing memory wins.';
    default:
      return 'Kept the stored value of ' + key + '.';
  }
}

function outcomeWords(result) {
  switch (result.outcome) {
    case 'created': return ['Saved ' + result.key + ' (new).', 'ok'];
    case 'updated': return ['Saved ' + result.key + ': the previous value was replaced.', 'ok'];
    case 'unchanged': return [result.key + ' already holds exactly this; nothing changed.', 'ok'];
    case 'skipped': return ['Not written. ' + skipWords(result.key, result.reason), 'warn'];
    default: return [JSON.stringify(result), ''];
  }
}

async function saveFact(event) {
  event.preventDefault();
  const key = $('fact-key').value.trim();
  const raw = $('fact-value').value;
  let value = raw;
  if ($('fact-json').checked) {
    try {
      value = JSON.parse(raw);
    } catch (error) {
      say('fact-msg', 'The value is not valid JSON: ' + error.message, 'error');
      return;
    }
  }
  const body = {
    key,
    value,
    source: $('fact-source').value,
    confidence: Number($('fact-confidence').value),
  };
  await guarded('fact-msg', async () => {
    const data = await api('PUT', '/api/memory/semantic', body);
    const [words, kind] = outcomeWords(data.result);
    say('fact-msg', words, kind);
    if (data.result.outcome !== 'skipped') {
      $('fact-value').value = '';
      await Promise.all([loadFacts(), loadCounts()]);
    }
  });
}

async function deleteFact(key, scope) {
  await guarded('fact-msg', async () => {
    await api('DELETE', '/api/memory/semantic/' + encodeURIComponent(key) + '?only=' + encodeURIComponent(scope || 'global'));
    say('fact-msg', 'Deleted ' + key + ' (the audit trail keeps the old value).', 'ok');
    await Promise.all([loadFacts(), loadCounts()]);
  });
}

async function searchFacts(event) {
  event.preventDefault();
  const q = $('fact-q').value.trim();
  if (!q) {
    loadFacts();
    return;
  }
  await guarded('fact-msg', async () => {
    const data = await api('GET', '/api/memory/semantic?limit=100&' + scopeParams() + '&q=' + encodeURIComponent(q));
    const hits = data.results.filter((hit) => !hit.key.startsWith('lesson.'));
    state.factSearch = true;
    state.facts = hits;
    state.factsShown = 0;
    clear($('fact-list'));
    $('fact-summary').textContent = hits.length + ' matching ' + (hits.length === 1 ? 'fact' : 'facts')
      + ' (' + data.mode + ' search; score = ' + (data.mode === 'hybrid' ? 'vector and keyword' : 'keyword') + ')';
    $('fact-list').append(...hits.map((hit) => el('tr', { data: { key: hit.key, scope: hit.scope } },
      cell('Key', el('code', { text: hit.key })),
      cell('Scope', scopeChip(hit.scope)),
      cell('Value', valueText(hit.value), 'fact-value'),
      cell('Score', 'score ' + num(hit.score, 3) + ' · keyword ' + num(hit.keyword_score, 3)
        + ' · vector ' + num(hit.vector_score, 3)),
      cell('', ''),
      cell('', ''),
      cell('', el('button', { type: 'button', class: 'small danger', text: 'Delete', onclick: () => deleteFact(hit.key, hit.scope) }),
        'actions'))));
    state.factsShown = hits.length;
    $('fact-more').hidden = true;
  });
}

// ---- memory: episodic --------------------------------------------------

function scoreParts(score) {
  if (!score) return [];
  const parts = [
    ['score', num(score.score, 3)],
    ['fused', num(score.fused, 3)],
    ['cosine', num(score.cosine, 3)],
    ['bm25', num(score.bm25, 3)],
    ['vector rank', score.vector_rank ?? '—'],
    ['keyword rank', score.keyword_rank ?? '—'],
    ['importance', num(score.importance, 2)],
    ['age', num(score.age_days, 1) + ' d'],
  ];
  if (score.admitted !== null && score.admitted !== undefined) {
    parts.push(['context gate', score.admitted ? 'admitted' : 'below threshold']);
  }
  return parts.map(([name, value]) => el('span', { class: 'chip score-part', text: name + ' ' + value }));
}

function episodeRow(row, score) {
  const meta = [
    el('span', { text: '#' + row.id }),
    scopeChip(row.scope),
    el('span', { text: when(row.created_at) }),
  ];
  if (row.source) meta.push(el('span', { text: row.source }));
  if (row.importance !== undefined && !score) meta.push(el('span', { text: 'importance ' + num(row.importance, 2) }));
  if (row.has_vector === false) meta.push(el('span', { class: 'chip', text: 'no vector yet' }));
  for (const tag of row.tags || []) meta.push(el('span', { class: 'chip', text: tag }));
  meta.push(...scoreParts(score));
  meta.push(el('button', { type: 'button', class: 'small danger', text: 'Delete', onclick: () => deleteEpisode(row.id) }));
  return el('li', { data: { id: row.id } },
    el('div', { class: 'row-text', text: row.text }),
    el('div', { class: 'row-meta' }, meta));
}

function renderEpisodePager() {
  const searching = !$('epi-pager').dataset.list;
  const from = state.episodeOffset + 1;
  const to = Math.min(state.episodeOffset + EPISODE_PAGE, state.episodeTotal);
  $('epi-page').textContent = state.episodeTotal === 0 ? 'no fragments' : from + '–' + to + ' of ' + state.episodeTotal;
  $('epi-prev').disabled = searching || state.episodeOffset === 0;
  $('epi-next').disabled = searching || to >= state.episodeTotal;
}

async function loadEpisodes(offset) {
  state.loaded.add('episodic');
  await guarded('epi-summary', async () => {
    const data = await api('GET', '/api/memory/episodic?limit=' + EPISODE_PAGE + '&offset=' + offset + '&' + scopeParams());
    state.episodeOffset = data.offset;
    if ($('scope-filter').value) {
      // The counts are of every scope: one project's end shows as a short page.
      const shown = data.offset + data.episodes.length;
      state.episodeTotal = data.episodes.length < EPISODE_PAGE ? shown : shown + 1;
    }
    clear($('epi-list')).append(...data.episodes.map((row) => episodeRow(row, null)));
    $('epi-summary').textContent = 'Newest first.';
    $('epi-summary').className = 'muted';
    $('epi-pager').hidden = false;
    $('epi-pager').dataset.list = '1';
    renderEpisodePager();
  });
}

async function searchEpisodes(event) {
  event.preventDefault();
  const q = $('epi-q').value.trim();
  if (!q) {
    loadEpisodes(0);
    return;
  }
  await guarded('epi-summary', async () => {
    const data = await api('GET', '/api/memory/episodic/search?limit=20&' + scopeParams() + '&q=' + encodeURIComponent(q));
    clear($('epi-list')).append(...data.results.map((hit) => episodeRow(hit, hit.score)));
    $('epi-summary').textContent = data.results.length + ' ' + (data.results.length === 1 ? 'hit' : 'hits')
      + ' for “' + q + '”, best first.';
    $('epi-summary').className = 'muted';
    delete $('epi-pager').dataset.list;
    $('epi-pager').hidden = true;
  });
}

async function deleteEpisode(id) {
  await guarded('epi-summary', async () => {
    await api('DELETE', '/api/memory/episodic/' + encodeURIComponent(id));
    for (const item of $('epi-list').querySelectorAll('li')) {
      if (item.dataset.id === String(id)) item.remove();
    }
    state.episodeTotal = Math.max(0, state.episodeTotal - 1);
    $('epi-summary').textContent = 'Deleted fragment #' + id + '.';
    renderEpisodePager();
    loadCounts();
  });
}

// ---- memory: lessons and audit ----------------------------------------

async function loadLessons() {
  await guarded('lesson-msg', async () => {
    const data = await api('GET', '/api/memory/lessons?limit=200');
    clear($('lesson-list')).append(...data.lessons.map((lesson) => el('li', { data: { key: lesson.key } },
      el('div', { class: 'row-text', text: lesson.rule }),
      lesson.not ? el('div', { class: 'row-text muted', text: 'Not: ' + lesson.not }) : null,
      el('div', { class: 'row-meta' },
        el('span', { class: 'chip', text: lesson.category }),
        el('span', { text: lesson.source }),
        el('span', { text: when(lesson.updated_at) }),
        el('button', { type: 'button', class: 'small danger', text: 'Remove', onclick: () => removeLesson(lesson.key) })))));
    if (data.lessons.length === 0) $('lesson-list').append(el('li', { class: 'muted', text: 'No lessons yet.' }));
  });
}

async function addLesson(event) {
  event.preventDefault();
  const body = { rule: $('lesson-rule').value.trim(), category: $('lesson-category').value };
  const not = $('lesson-not').value.trim();
  if (not) body.not = not;
  await guarded('lesson-msg', async () => {
    const data = await api('POST', '/api/memory/lessons', body);
    const outcome = data.result.outcome;
    const replaced = data.result.replaced || [];
    let words;
    let kind = 'ok';
    if (outcome.outcome === 'created') words = 'Learned (' + outcome.key + ').';
    else if (outcome.outcome === 'updated') words = 'Updated the lesson ' + outcome.key + '.';
    else if (outcome.outcome === 'unchanged') words = 'Already known as ' + outcome.key + '; nothing changed.';
    else {
      words = 'Not added. ' + skipWords(outcome.key, outcome.reason);
      kind = 'warn';
    }
    if (replaced.length) words += ' It replaced the shorter lesson' + (replaced.length > 1 ? 's ' : ' ') + replaced.join(', ') + '.';
    say('lesson-msg', words, kind);
    if (kind === 'ok') {
      $('lesson-rule').value = '';
      $('lesson-not').value = '';
    }
    await Promise.all([loadLessons(), loadCounts()]);
  });
}

async function removeLesson(key) {
  await guarded('lesson-msg', async () => {
    await api('DELETE', '/api/memory/lessons/' + encodeURIComponent(key));
    say('lesson-msg', 'Removed ' + key + '.', 'ok');
    await Promise.all([loadLessons(), loadCounts()]);
  });
}

async function loadAudit() {
  await guarded('fact-msg', async () => {
    const data = await api('GET', '/api/memory/events?limit=100');
    clear($('audit-list')).append(...data.events.map((event) => el('tr', {},
      cell('When', when(event.at), 'num'),
      cell('Layer', event.memory_type),
      cell('Action', el('span', { class: event.action === 'rejected' || event.action.endsWith('_blocked') ? 'chip bad' : 'chip', text: event.action })),
      cell('Key', el('code', { text: event.key })),
      cell('Source', event.source || '—'),
      cell('Detail', event.detail || '—'),
      cell('New value', event.new_value === null || event.new_value === undefined ? '—' : event.new_value))));
  });
}

// ---- memory: import from other agents ---------------------------------

const SOURCE_NAMES = { 'claude-code': 'Claude Code', hermes: 'Hermes', openclaw: 'OpenClaw' };
/** Entries listed in the table; the counts cover every entry. */
const IMPORT_ROWS = 300;
/** Outcomes that mean an entry is (or would be) written. */
const LANDING = new Set(['offered', 'written']);
const OUTCOME_WORDS = {
  offered: 'would be written',
  written: 'written',
  exists: 'kept: existing memory has it',
  already_imported: 'already imported',
  refused: 'refused by a rule',
  unsupported: 'not imported',
  lesson_cap: 'over the lesson limit',
  store_full: 'episodic store full',
};

function importRequest() {
  const body = { from: $('import-from').value };
  for (const [field, id] of [['claude_home', 'import-claude'], ['hermes_home', 'import-hermes'],
    ['openclaw_workspace', 'import-openclaw']]) {
    const value = $(id).value.trim();
    if (value) body[field] = value;
  }
  const project = $('import-project').value.trim();
  if (project) body.projects = [project];
  return body;
}

function plural(count, one, many) {
  return count + ' ' + (count === 1 ? one : many);
}

/** Per source: what lands where, what is skipped and why, and the file-level findings. */
function importSourceCard(source, report) {
  const items = report.items.filter((item) => item.source === source);
  const landing = items.filter((item) => LANDING.has(item.outcome));
  const count = (kind) => landing.filter((item) => item.lands_as === kind).length;
  const skipped = new Map();
  for (const item of items) {
    if (!LANDING.has(item.outcome)) skipped.set(item.outcome, (skipped.get(item.outcome) || 0) + 1);
  }
  const rows = [
    ['Lessons', count('lesson')],
    ['Facts', count('semantic')],
    ['Episodic rows', count('episodic')],
    ...[...skipped].map(([outcome, n]) => [OUTCOME_WORDS[outcome] || outcome, n]),
  ];
  const diagnostics = report.diagnostics.filter((diagnostic) => diagnostic.source === source);
  return el('article', { class: 'card import-source', data: { source } },
    el('h2', { text: SOURCE_NAMES[source] || source }),
    el('p', { class: 'muted', text: plural(items.length, 'entry', 'entries') + ' found; '
      + plural(landing.length, 'entry', 'entries') + (report.dry_run ? ' would be written, ' : ' written, ')
      + (items.length - landing.length) + ' skipped.' }),
    el('dl', { class: 'counts' }, rows.flatMap(([name, value]) => [
      el('dt', { text: name }), el('dd', { data: { count: name }, text: value })])),
    diagnostics.length ? el('h3', { text: 'Findings' }) : null,
    diagnostics.length ? el('ul', { class: 'import-diagnostics' }, diagnostics.map((diagnostic) => el('li',
      { data: { code: diagnostic.code } },
      el('span', { class: 'chip warn', text: diagnostic.code }), ' ', diagnostic.message, ' ',
      el('code', { text: diagnostic.path })))) : null);
}

function importItemRow(item) {
  const outcome = OUTCOME_WORDS[item.outcome] || item.outcome;
  const reason = (item.code ? ' (' + item.code + ')' : '') + (item.message ? ': ' + item.message : '');
  return el('tr', { data: { source: item.source, outcome: item.outcome } },
    cell('Source', SOURCE_NAMES[item.source] || item.source),
    cell('File', el('code', { text: item.path })),
    cell('Entry', item.locator),
    cell('Lands as', item.lands_as + (item.key ? ' ' + item.key : '')),
    cell('Outcome', [el('span', { class: LANDING.has(item.outcome) ? 'chip' : 'chip warn', text: outcome }), reason]),
    cell('Text', item.preview, 'import-preview'));
}

function renderImport(report) {
  clear($('import-sources')).append(...report.sources.map((source) => importSourceCard(source, report)));
  const rows = report.items.slice(0, IMPORT_ROWS);
  clear($('import-item-list')).append(...rows.map(importItemRow));
  $('import-more').textContent = report.items.length > rows.length
    ? (report.items.length - rows.length) + ' more entries are not listed; the counts above include them.'
    : '';
}

function landingWords(counts) {
  return plural(counts.lessons, 'lesson', 'lessons') + ', ' + plural(counts.semantic, 'fact', 'facts') + ' and '
    + plural(counts.episodic, 'episodic row', 'episodic rows');
}

function ledgerWords(report) {
  const offered = report.counts.lessons + report.counts.semantic + report.counts.episodic;
  if (report.counts.already_imported === 0) return '';
  return 'Ledger: ' + plural(report.counts.already_imported, 'entry of these files is', 'entries of these files are')
    + ' recorded as imported and will not be written again'
    + (offered ? '; ' + offered + ' would still be offered.' : '; importing again changes nothing.');
}

async function scanImport(event) {
  if (event) event.preventDefault();
  $('import-confirm').hidden = true;
  $('import-ask').hidden = true;
  const body = importRequest();
  say('import-msg', 'Reading the files…');
  await guarded('import-msg', async () => {
    const data = await api('POST', '/api/import/scan', body);
    const report = data.report;
    state.importScan = { body, report };
    renderImport(report);
    const offered = report.counts.lessons + report.counts.semantic + report.counts.episodic;
    say('import-msg', 'Dry run, nothing written: ' + plural(report.files_read, 'file', 'files') + ' read; '
      + (offered ? landingWords(report.counts) + ' would be offered to the writers.' : 'nothing new to import.'),
    offered ? 'ok' : '');
    $('import-ledger').textContent = ledgerWords(report);
    $('import-ask').hidden = offered === 0;
  });
}

function askImport() {
  const scan = state.importScan;
  if (!scan) return;
  const names = scan.report.sources.map((source) => SOURCE_NAMES[source] || source).join(', ');
  $('import-confirm-text').textContent = 'Import ' + landingWords(scan.report.counts) + ' from ' + names + '? '
    + 'Each entry goes through Cairn\'s writers again (screening, dedup, conflicts, caps): existing memory wins, '
    + 'nothing is deleted, and episodic rows are embedded afterwards.';
  $('import-confirm').hidden = false;
  $('import-ask').hidden = true;
}

async function applyImport() {
  const scan = state.importScan;
  if (!scan) return;
  $('import-confirm').hidden = true;
  say('import-msg', 'Importing…');
  await guarded('import-msg', async () => {
    const data = await api('POST', '/api/import/apply', scan.body);
    const report = data.report;
    renderImport(report);
    let words = 'Imported ' + landingWords(report.counts) + '.';
    if (report.counts.exists) words += ' ' + plural(report.counts.exists, 'entry', 'entries') + ' kept existing memory.';
    if (data.backfill.scheduled) words += ' The new episodic rows are being embedded (see Embedding model).';
    say('import-msg', words, 'ok');
    loadEmbedding();
    loadCounts();
    // The ledger as a new scan reads it.
    const again = await api('POST', '/api/import/scan', scan.body);
    state.importScan = { body: scan.body, report: again.report };
    $('import-ledger').textContent = ledgerWords(again.report);
    const offered = again.report.counts.lessons + again.report.counts.semantic + again.report.counts.episodic;
    $('import-ask').hidden = offered === 0;
  });
}

// ---- context -----------------------------------------------------------

function sectionBars(target, part) {
  clear(target);
  for (const section of part.sections) {
    const hasCap = section.cap !== null && section.cap !== undefined;
    const bar = hasCap
      ? el('meter', { min: 0, max: Math.max(section.cap, 1), value: Math.min(section.chars, section.cap), title: section.name })
      : el('progress', { max: Math.max(section.chars, 1), value: section.chars, title: section.name });
    const amount = hasCap ? section.chars + ' / ' + section.cap + ' chars' : section.chars + ' chars (no cap)';
    target.append(el('div', { class: 'bar' + (section.truncated ? ' truncated' : ''), data: { section: section.name } },
      el('span', { class: 'label', text: section.name }),
      bar,
      el('span', { class: 'amount', text: amount })));
  }
  const total = part.sections.reduce((sum, section) => sum + section.chars, 0);
  let line = 'total ' + total + ' chars';
  if (part.ceiling) line += ' of a ' + part.ceiling + '-char ceiling';
  if (part.caps && part.caps.window_tokens) line += ' · window ' + part.caps.window_tokens + ' tokens';
  target.append(el('p', { class: 'muted', text: line }));
  for (const notice of part.notices || []) target.append(el('p', { class: 'message warn', text: valueText(notice) }));
}

async function previewContext(event) {
  event.preventDefault();
  const params = new URLSearchParams();
  params.set('q', $('ctx-q').value);
  const windowTokens = $('ctx-window').value.trim();
  if (windowTokens) params.set('window', windowTokens);
  say('ctx-msg', 'Assembling…');
  await guarded('ctx-msg', async () => {
    const data = await api('GET', '/api/memory/context-preview?' + params.toString());
    sectionBars($('ctx-session-bars'), data.session);
    sectionBars($('ctx-message-bars'), data.message);
    $('ctx-session-text').textContent = data.session.text;
    $('ctx-message-text').textContent = data.message.text;
    $('ctx-out').hidden = false;
    say('ctx-msg', 'Nothing was recorded: a preview counts no deliveries.', 'ok');
  });
}

// ---- skills ------------------------------------------------------------

const SKILL_TEMPLATE = '---\nname: my-skill\ndescription: What this skill helps with, in one line\ntriggers: word, another phrase\n---\n\n# My skill\n\nSteps the agent should follow.\n';

const SEVERITIES = ['error', 'portability', 'warning'];

function severityChip(severity, text) {
  return el('span', { class: severity === 'error' ? 'chip bad' : 'chip warn', data: { severity }, text });
}

/** A skill's load problem and its lint findings counted by severity. */
function findingChips(warning, findings) {
  const chips = [];
  if (warning) chips.push(el('span', { class: 'chip bad', text: warning }));
  for (const severity of SEVERITIES) {
    const count = (findings || []).filter((finding) => finding.severity === severity).length;
    if (count) chips.push(severityChip(severity, count + ' ' + severity));
  }
  return chips.length ? chips : el('span', { class: 'muted', text: 'none' });
}

function lintSummary(findings) {
  const has = (severity) => findings.some((finding) => finding.severity === severity);
  if (findings.length === 0) return 'No findings: Cairn and every Agent Skills host read this skill as meant.';
  const count = plural(findings.length, 'finding', 'findings');
  if (has('error')) return count + ': no host, Cairn included, can read this skill\'s metadata.';
  if (has('portability')) return count + ': Cairn reads it; hosts that enforce the Agent Skills standard reject it.';
  return count + ': valid everywhere, but Cairn will not use it quite as written.';
}

async function loadSkills() {
  await guarded('skills-msg', async () => {
    const [data, lint] = await Promise.all([api('GET', '/api/skills'), api('GET', '/api/skills/-/lint')]);
    const findings = new Map(lint.skills.map((report) => [report.name, report.findings]));
    clear($('skill-list')).append(...data.skills.map((skill) => skillRow(skill, findings.get(skill.name))));
    if (data.skills.length === 0) {
      $('skill-list').append(el('tr', {}, el('td', { colspan: '8', class: 'muted', text: 'No skills yet.' })));
    }
  });
}

// ---- skills: pending auto-skills -------------------------------------

function pendingPath(slug, action) {
  return '/api/skills/-/pending/' + encodeURIComponent(slug) + '/' + action;
}

function pendingItem(candidate) {
  const meta = [
    el('code', { text: candidate.name }),
    el('span', { text: 'from session ' + candidate.session_key }),
    el('span', { text: candidate.created_at }),
  ];
  if (candidate.triggers.length) meta.push(el('span', { text: 'triggers: ' + candidate.triggers.join(', ') }));
  if (candidate.has_script) meta.push(el('span', { class: 'chip warn', text: 'helper script' }));
  const update = candidate.kind === 'update';
  meta.unshift(el('span', { class: update ? 'chip warn pending-kind' : 'chip pending-kind', text: update ? 'update of the live skill' : 'new skill' }));
  return el('li', { data: { slug: candidate.slug, kind: candidate.kind } },
    el('div', { class: 'row-text', text: candidate.description }),
    el('div', { class: 'row-meta' }, meta),
    update && candidate.current_procedure !== null ? el('h3', { text: 'Live procedure (replaced on approval, kept as a version)' }) : null,
    update && candidate.current_procedure !== null ? el('pre', { class: 'assembled pending-current', text: candidate.current_procedure }) : null,
    el('h3', { text: update ? 'Proposed procedure' : 'Procedure' }),
    el('pre', { class: 'assembled pending-procedure', text: candidate.procedure }),
    candidate.script === null ? null : el('h3', { text: 'scripts/helper.py' }),
    candidate.script === null ? null : el('pre', { class: 'assembled pending-script', text: candidate.script }),
    el('div', { class: 'row-meta' },
      el('button', { type: 'button', class: 'small', text: 'Approve', onclick: () => reviewPending(candidate.slug, 'approve') }),
      el('button', { type: 'button', class: 'small danger', text: 'Reject', onclick: () => reviewPending(candidate.slug, 'reject') })));
}

async function loadSkillAudit() {
  await guarded('skill-audit-msg', async () => {
    const data = await api('GET', '/api/skills/-/audit?limit=50');
    clear($('skill-audit-list')).append(...data.events.map((event) => el('tr', {},
      cell('When', event.at || '—'),
      cell('Action', el('code', { text: event.action })),
      cell('Skills', event.skills.join(', ') || '—'),
      cell('Outcome', el('span', { class: event.ok ? 'chip' : 'chip bad', text: event.ok ? 'ok' : 'refused' })),
      cell('Detail', event.detail || ''))));
    const notes = [];
    if (data.events.length === 0) notes.push('No auto-skill event yet.');
    if (data.skipped) notes.push(plural(data.skipped, 'unreadable line', 'unreadable lines') + ' skipped.');
    if (data.truncated) notes.push('Older events are not shown.');
    say('skill-audit-msg', notes.join(' '));
  });
}

async function loadPending() {
  await guarded('pending-msg', async () => {
    const data = await api('GET', '/api/skills/-/pending');
    clear($('pending-list')).append(...data.pending.map(pendingItem));
    if (data.pending.length === 0) $('pending-list').append(el('li', { class: 'muted', text: 'No candidates waiting for review.' }));
  });
}

async function reviewPending(slug, action) {
  await guarded('pending-msg', async () => {
    const data = await api('POST', pendingPath(slug, action));
    if (action === 'approve') say('pending-msg', 'Approved: ' + data.approved + ' is a live skill now.', 'ok');
    else say('pending-msg', 'Rejected ' + data.rejected + '; its files were removed.', 'ok');
    await Promise.all([loadPending(), loadSkills(), loadSkillAudit()]);
  });
}

// ---- skills tab: consolidation changesets and runs ---------------------

function describeWrite(write) {
  switch (write.kind) {
    case 'fact': return write.key + ' = ' + JSON.stringify(write.value) + (write.scope === 'global' ? '' : ' [' + write.scope + ']');
    case 'lesson': return write.rule + (write.not ? ' — NOT: ' + write.not : '');
    case 'episode': return write.text;
    case 'history': return write.text;
    default: return write.text;
  }
}

function reviewRow(run, row) {
  const evidence = row.write.evidence;
  const meta = [
    el('span', { class: 'chip review-kind', text: row.write.kind }),
    el('span', { class: 'review-ladder', text: 'ladder: ' + (row.ladder || '—') }),
    el('span', { class: row.screen === 'passed' ? 'review-screen' : 'chip bad review-screen', text: 'screen: ' + (row.screen || '—') }),
    el('span', { class: 'review-status', text: row.status + (row.outcome ? ' (' + row.outcome + ')' : '') }),
  ];
  const buttons = row.status === 'pending' ? el('div', { class: 'row-meta' },
    el('button', { type: 'button', class: 'small review-approve', text: 'Approve row ' + row.row, onclick: () => decide(run.id, 'approve', row.row) }),
    el('button', { type: 'button', class: 'small danger review-reject', text: 'Reject row ' + row.row, onclick: () => decide(run.id, 'reject', row.row) })) : null;
  return el('li', { data: { row: String(row.row), status: row.status } },
    el('div', { class: 'row-text', text: '#' + row.row + ' ' + describeWrite(row.write) }),
    el('div', { class: 'row-meta' }, meta),
    evidence ? el('div', { class: 'row-meta review-evidence', text: 'evidence: session ' + evidence.session_key + ', messages ' + evidence.from_message + '–' + evidence.to_message + ': “' + evidence.quote + '”' }) : null,
    buttons);
}

function reviewItem(run) {
  return el('li', { data: { changeset: String(run.id) } },
    el('div', { class: 'row-text', text: 'Changeset ' + run.id + ': ' + run.path + ' path of session ' + run.session_key }),
    el('div', { class: 'row-meta' },
      el('span', { text: plural(run.rows.length, 'row', 'rows') }),
      run.expires_at ? el('span', { text: 'expires ' + when(run.expires_at) }) : null,
      el('button', { type: 'button', class: 'small review-approve-all', text: 'Approve all', onclick: () => decide(run.id, 'approve', null) }),
      el('button', { type: 'button', class: 'small danger review-reject-all', text: 'Reject all', onclick: () => decide(run.id, 'reject', null) })),
    el('ol', { class: 'rows review-rows' }, run.rows.map((row) => reviewRow(run, row))));
}

async function loadReview() {
  await guarded('review-msg', async () => {
    const [pendingData, runData] = await Promise.all([api('GET', '/api/memory/pending'), api('GET', '/api/memory/runs')]);
    clear($('review-list')).append(...pendingData.pending.map(reviewItem));
    if (pendingData.pending.length === 0) $('review-list').append(el('li', { class: 'muted', text: 'No changeset waiting for review.' }));
    const applied = runData.runs.filter((run) => run.state === 'applied' || run.state === 'reverted').slice(0, 10);
    clear($('run-list')).append(...applied.map((run) => el('li', { data: { run: String(run.id), state: run.state } },
      el('div', { class: 'row-text', text: 'Run ' + run.id + ': ' + run.path + ' path of session ' + run.session_key }),
      el('div', { class: 'row-meta' },
        el('span', { class: run.state === 'reverted' ? 'chip warn' : 'chip', text: run.state }),
        el('span', { text: plural(run.applied.length, 'change', 'changes') }),
        el('span', { text: when(run.created_at) })))));
    if (applied.length === 0) $('run-list').append(el('li', { class: 'muted', text: 'No consolidation run recorded.' }));
  });
}

async function decide(id, action, row) {
  await guarded('review-msg', async () => {
    const query = row === null ? '' : '?rows=' + row;
    const run = await api('POST', '/api/memory/pending/' + id + '/' + action + query);
    const what = row === null ? 'Changeset ' + id : 'Row ' + row + ' of changeset ' + id;
    say('review-msg', what + (action === 'approve' ? ' approved' : ' rejected') + '; the changeset is ' + run.state + '.', 'ok');
    await loadReview();
  });
}

async function revertLastRun() {
  await guarded('review-msg', async () => {
    const report = await api('POST', '/api/memory/runs/revert?runs=1');
    say('review-msg', 'Reverted run ' + report.runs.join(', ') + ': ' + report.semantic_restored + ' facts and lessons put back, ' + report.episodic_removed + ' episodes removed, ' + report.files_restored + ' files put back.', 'ok');
    await loadReview();
  });
}

function skillRow(skill, findings) {
  const toggle = el('input', {
    type: 'checkbox',
    class: 'inject-toggle',
    checked: Boolean(skill.inject_on_trigger),
    disabled: !skill.owned,
    title: skill.owned ? 'Inject the body when a trigger matches' : 'Only skills in the Cairn home can be edited',
    'aria-label': 'inject ' + skill.name + ' on trigger',
  });
  toggle.addEventListener('change', () => setInject(skill.name, toggle));
  return el('tr', { data: { name: skill.name } },
    cell('Skill', el('button', { type: 'button', class: 'small', text: skill.name, onclick: () => showSkill(skill.name) })),
    cell('Description', skill.description || '—'),
    cell('Source', skill.source + (skill.always ? ' · always on' : '')),
    cell('Size', bytes(skill.size_bytes), 'num'),
    cell('Deliveries', skill.deliveries === null || skill.deliveries === undefined ? '—' : valueText(skill.deliveries), 'num'),
    cell('Findings', findingChips(skill.warning, findings), 'skill-findings'),
    cell('Inject on trigger', el('label', { class: 'check' }, toggle, skill.owned ? '' : 'read-only')),
    cell('', skill.owned
      ? el('button', { type: 'button', class: 'small danger', text: 'Delete', onclick: () => deleteSkill(skill.name) })
      : '', 'actions'));
}

async function setInject(name, toggle) {
  const inject = toggle.checked;
  toggle.disabled = true;
  try {
    const data = await api('POST', '/api/skills/-/inject-on-trigger', { name, inject });
    say('skills-msg', name + (inject ? ' is injected when a trigger matches' : ' is no longer injected on a trigger')
      + (data.changed ? '; SKILL.md updated.' : '; SKILL.md already said so.'), 'ok');
  } catch (error) {
    toggle.checked = !inject;
    if (!(error instanceof ApiError && error.status === 401)) say('skills-msg', refusal(error), 'error');
  } finally {
    toggle.disabled = false;
  }
}

async function showSkill(name) {
  await guarded('skills-msg', async () => {
    const data = await api('GET', '/api/skills/' + name.split('/').map(encodeURIComponent).join('/'));
    $('skill-detail').hidden = false;
    $('skill-detail-name').textContent = data.name;
    const meta = [data.path, bytes(data.size_bytes)];
    if (data.triggers && data.triggers.length) meta.push('triggers: ' + data.triggers.join(', '));
    if (data.always) meta.push('always on');
    $('skill-detail-meta').textContent = meta.join(' · ');
    $('skill-detail-content').textContent = data.content;
    $('skill-edit-content').value = data.content;
    $('skill-edit-form').hidden = true;
    // Only a skill in the Cairn home is Cairn's to edit.
    $('skill-edit').hidden = !data.owned;
    state.skillShown = data.name;
    const lint = data.lint || [];
    $('skill-lint-summary').textContent = lintSummary(lint);
    clear($('skill-lint-list')).append(...lint.map((finding) => el('tr', { data: { rule: finding.rule } },
      cell('Severity', severityChip(finding.severity, finding.severity)),
      cell('Rule', el('code', { text: finding.rule })),
      cell('Finding', finding.message))));
    for (const row of $('skill-list').querySelectorAll('tr')) row.classList.toggle('selected', row.dataset.name === name);
  });
}

async function createSkill(event) {
  event.preventDefault();
  const body = { name: $('skill-name').value.trim(), content: $('skill-content').value };
  await guarded('skills-msg', async () => {
    const data = await api('POST', '/api/skills', body);
    say('skills-msg', 'Created ' + data.name + '.', 'ok');
    $('skill-name').value = '';
    $('skill-content').value = SKILL_TEMPLATE;
    await loadSkills();
  });
}

function editSkill() {
  $('skill-edit-form').hidden = false;
  $('skill-edit').hidden = true;
  $('skill-edit-content').focus();
}

async function saveSkill(event) {
  event.preventDefault();
  const name = state.skillShown;
  if (!name) return;
  await guarded('skills-msg', async () => {
    await api('PUT', '/api/skills/' + name.split('/').map(encodeURIComponent).join('/'), { content: $('skill-edit-content').value });
    await loadSkills();
    await showSkill(name);
    say('skills-msg', 'Saved ' + name + '.', 'ok');
  });
}

async function deleteSkill(name) {
  await guarded('skills-msg', async () => {
    await api('DELETE', '/api/skills/' + name.split('/').map(encodeURIComponent).join('/'));
    say('skills-msg', 'Deleted ' + name + '.', 'ok');
    if ($('skill-detail-name').textContent === name) $('skill-detail').hidden = true;
    await loadSkills();
  });
}

// ---- agents ------------------------------------------------------------

async function loadAgents() {
  await guarded('agents-msg', async () => {
    const data = await api('GET', '/api/agents');
    clear($('agent-list')).append(...data.agents.map((agent) => el('tr', { data: { name: agent.name } },
      cell('Agent', el('button', { type: 'button', class: 'small', text: agent.name, onclick: () => showAgent(agent.name) })),
      cell('Description', agent.description || '—'),
      cell('Scope', agent.scope),
      cell('Format', agent.format),
      cell('File', agent.path),
      cell('State', agent.error
        ? el('span', { class: 'chip bad', text: valueText(agent.error) })
        : (agent.warnings && agent.warnings.length
          ? agent.warnings.map((warning) => el('div', { class: 'chip warn', text: valueText(warning) }))
          : 'ok')))));
    if (data.agents.length === 0) {
      $('agent-list').append(el('tr', {}, el('td', { colspan: '6', class: 'muted', text: 'No agent specs found.' })));
    }
  });
}

async function showAgent(name) {
  await guarded('agents-msg', async () => {
    const data = await api('GET', '/api/agents/detail/' + encodeURIComponent(name));
    $('agent-detail').hidden = false;
    $('agent-detail-name').textContent = data.name;
    const prompt = data.prompt || {};
    const fields = [
      ['File', data.file + ' (' + data.scope + ', ' + data.format + (data.editable ? '' : ', read-only') + ')'],
      ['Model', data.model || '—'],
      ['Description', data.description || '—'],
      ['Prompt', prompt.refused ? 'refused: ' + prompt.refused : (prompt.text ? prompt.text.length + ' chars' : 'none')],
      ['Skills', (data.skills || []).join(', ') || '—'],
      ['MCP servers', (data.mcp_servers || []).join(', ') || '—'],
      ['Tools', data.is_toolless ? 'none' : (data.granted_tools && data.granted_tools.everything ? 'all (*)' : 'some')],
    ];
    for (const warning of data.warnings || []) fields.push(['Warning', valueText(warning)]);
    clear($('agent-detail-fields')).append(...fields.flatMap(([label, value]) => [
      el('dt', { text: label }), el('dd', { text: value })]));
    const findings = data.diagnostics || [];
    const rejects = findings.filter((finding) => finding.kiro_cli_rejects).length;
    $('agent-check-summary').textContent = findings.length === 0
      ? 'No findings: kiro-cli loads this file.'
      : findings.length + (findings.length === 1 ? ' finding' : ' findings')
        + (rejects ? '; kiro-cli\'s strict loader drops the whole file because of ' + rejects + ' of them.' : '; kiro-cli still loads the file.');
    $('agent-check-summary').className = rejects ? 'error' : '';
    state.agentShown = data.name;
    $('agent-model').value = data.model || '';
    $('agent-skills').value = (data.skills || []).join(', ');
    for (const id of ['agent-model', 'agent-skills', 'agent-template-save']) $(id).disabled = !data.editable;
    say('agent-template-msg', data.editable ? '' : 'This spec is read-only here (' + data.scope + ', ' + data.format + ').', data.editable ? '' : 'warn');
    clear($('agent-projection-list'));
    clear($('agent-projection-notices'));
    $('agent-projection-summary').textContent = '';
    clear($('agent-finding-list')).append(...findings.map((finding) => el('tr', {},
      cell('Severity', el('span', { class: finding.severity === 'error' ? 'chip bad' : 'chip warn', text: finding.severity })),
      cell('Where', el('code', { text: finding.path || '(file)' })),
      cell('Finding', finding.message + ' [' + finding.code + ']'),
      cell('kiro-cli', finding.kiro_cli_rejects ? 'rejects this file: its loader refuses the whole spec for this' : 'loads it'))));
  });
}

const BACKENDS = ['kiro-cli', 'claude', 'codex', 'opencode', 'goose', 'strands', 'mimocode', 'kas', 'pi', 'deepseek'];

async function saveAgentTemplate(event) {
  event.preventDefault();
  const name = state.agentShown;
  if (!name) return;
  const skills = $('agent-skills').value.split(',').map((skill) => skill.trim()).filter(Boolean);
  const body = { skills };
  const model = $('agent-model').value.trim();
  if (model) body.model = model;
  await guarded('agent-template-msg', async () => {
    const data = await api('PATCH', '/api/agents/detail/' + encodeURIComponent(name), body);
    let words = 'Saved ' + name + ' (' + data.file + ').';
    for (const notice of data.notices || []) words += ' ' + valueText(notice);
    await showAgent(name);
    say('agent-template-msg', words, 'ok');
  });
}

function dispositionWords(ruling) {
  switch (ruling.disposition) {
    case 'delivered': return 'delivered';
    case 'translated': return 'translated';
    case 'no-channel': return 'no channel' + (ruling.channel ? ' (' + ruling.channel + ')' : '');
    case 'withheld': return 'withheld' + (ruling.class ? ' (' + ruling.class + ')' : '');
    default: return ruling.disposition;
  }
}

async function showProjection(event) {
  event.preventDefault();
  const name = state.agentShown;
  if (!name) return;
  const backend = $('agent-backend').value;
  await guarded('agent-template-msg', async () => {
    const data = await api('GET', '/api/agents/' + encodeURIComponent(name) + '/projection?backend=' + encodeURIComponent(backend));
    const projection = data.projection;
    $('agent-projection-summary').textContent = projection.spec_read
      ? name + ' on ' + backend + ': ' + projection.kind + ' projection, '
        + plural(projection.mcp_servers.length, 'MCP server', 'MCP servers') + ' given'
        + (projection.withheld_servers.length ? ', ' + projection.withheld_servers.length + ' withheld' : '') + '.'
      : backend + ' cannot use this spec at all.';
    clear($('agent-projection-list')).append(...projection.concerns.map((concern) => el('tr', { data: { concern: concern.concern } },
      cell('Field', el('code', { text: concern.concern })),
      cell('Set', concern.set ? 'yes' : '—'),
      cell('Reaches the harness', dispositionWords(concern)),
      cell('How', concern.detail))));
    clear($('agent-projection-notices')).append(...(projection.notices || []).map((notice) => el('li', { text: valueText(notice) })));
  });
}

// ---- MCP servers -------------------------------------------------------

async function loadMcpAgents() {
  const select = $('mcp-agent');
  const chosen = select.value;
  const data = await api('GET', '/api/agents');
  select.replaceChildren(el('option', { value: '', text: '(none: definitions only)' }),
    ...data.agents.filter((agent) => !agent.error).map((agent) => el('option', { value: agent.name, text: agent.name })));
  if (chosen && [...select.options].some((option) => option.value === chosen)) {
    select.value = chosen;
  } else if (select.options.length === 2) {
    // One agent: it is the one the page edits.
    select.value = select.options[1].value;
  }
}

async function loadMcp() {
  await guarded('mcp-msg', async () => {
    if (!state.loaded.has('mcp')) {
      await loadMcpAgents();
      // The gateway probes at start: show what it found without a click.
      const cached = await api('GET', '/api/mcp/probe');
      for (const result of cached.results) {
        if (!state.probes.has(result.name)) state.probes.set(result.name, result);
      }
      state.loaded.add('mcp');
    }
    const agent = $('mcp-agent').value;
    const data = await api('GET', '/api/mcp' + (agent ? '?agent=' + encodeURIComponent(agent) : ''));
    const editable = Boolean(data.agent && data.agent.editable);
    clear($('mcp-list')).append(...data.servers.map((server) => mcpRow(server, agent, editable)));
    if (data.servers.length === 0) {
      $('mcp-list').append(el('tr', {}, el('td', { colspan: '6', class: 'muted', text: 'No MCP servers are defined.' })));
    }
    if (agent && !editable) say('mcp-msg', 'The agent ' + agent + ' is read-only here; its servers are shown, not changed.', 'warn');
  });
}

function transportText(server) {
  if (server.transport === 'http') return server.url;
  return [server.command, ...(server.args || [])].join(' ');
}

function probeCell(name) {
  const result = state.probes.get(name);
  if (!result) return el('span', { class: 'muted', text: 'not probed' });
  const parts = [el('span', { class: result.status === 'ok' ? 'chip' : 'chip bad', text: result.status })];
  if (result.status === 'ok') {
    parts.push(' ' + result.tools.length + (result.tools.length === 1 ? ' tool' : ' tools'));
    if (result.server_name) parts.push(' · ' + result.server_name + (result.server_version ? ' ' + result.server_version : ''));
    if (result.tools.length) parts.push(el('div', { class: 'muted mcp-tools', text: result.tools.join(', ') }));
  } else {
    parts.push(' ' + [result.error, result.reason].filter(Boolean).join(': '));
  }
  parts.push(el('div', { class: 'muted', text: result.elapsed_ms + ' ms' }));
  return parts;
}

function mcpRow(server, agent, editable) {
  const source = server.source ? server.source.kind + ' ' + server.source.path : '—';
  let stateText = server.disabled ? 'disabled in its definition' : 'defined';
  if (agent) stateText = server.enabled ? 'enabled for ' + agent : 'not enabled for ' + agent;
  const action = agent && editable
    ? el('button', {
      type: 'button',
      class: server.enabled ? 'small danger' : 'small',
      text: server.enabled ? 'Disable' : 'Enable',
      onclick: () => toggleMcp(agent, server.name, !server.enabled),
    })
    : '';
  return el('tr', { data: { name: server.name } },
    cell('Server', el('code', { text: server.name })),
    cell('Transport', server.transport + ': ' + transportText(server)),
    cell('Defined in', source),
    cell('State', stateText, 'mcp-state'),
    cell('Probe', probeCell(server.name), 'mcp-probe'),
    cell('', action, 'actions'));
}

async function probeAll() {
  const button = $('mcp-probe');
  button.disabled = true;
  say('mcp-msg', 'Probing every enabled server (initialize, then tools/list)…');
  try {
    const report = await api('POST', '/api/mcp/probe', {});
    for (const result of report.results) state.probes.set(result.name, result);
    const skipped = report.skipped || [];
    $('mcp-skipped').textContent = skipped.length
      ? 'Not probed: ' + skipped.map((entry) => entry.name + ' (' + entry.reason + ')').join('; ')
      : '';
    await loadMcp();
    const ok = report.results.filter((result) => result.status === 'ok').length;
    say('mcp-msg', ok + ' of ' + report.results.length + ' servers answered.', ok === report.results.length ? 'ok' : 'warn');
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) say('mcp-msg', refusal(error), 'error');
  } finally {
    button.disabled = false;
  }
}

async function toggleMcp(agent, server, enabled) {
  await guarded('mcp-msg', async () => {
    const data = await api('POST', '/api/mcp/toggle', { agent, server, enabled });
    let words = server + (enabled ? ' is enabled for ' : ' is disabled for ') + agent
      + (data.changed ? ' (' + data.path + ' updated).' : ' (it already was).');
    for (const notice of data.notices || []) words += ' ' + valueText(notice);
    say('mcp-msg', words, 'ok');
    await loadMcp();
  });
}

// The pending MCP action: a dry run shown, waiting for Apply.
function askMcp(text, lines, apply) {
  state.mcpPending = apply;
  $('mcp-confirm').hidden = false;
  $('mcp-confirm-text').textContent = text;
  clear($('mcp-confirm-list')).append(...lines.map((line) => el('li', { text: line })));
  $('mcp-confirm-apply').disabled = !apply;
}

function closeMcpConfirm() {
  state.mcpPending = null;
  $('mcp-confirm').hidden = true;
}

async function syncMcp() {
  const agent = $('mcp-agent').value;
  if (!agent) {
    say('mcp-msg', 'Choose the agent whose spec the servers are synced into.', 'warn');
    return;
  }
  await guarded('mcp-msg', async () => {
    const plan = await api('POST', '/api/mcp/sync', { agent, dry_run: true });
    const lines = plan.added.map((name) => 'add ' + name)
      .concat(plan.kept.map((name) => 'keep ' + name + ': the agent spec\'s own definition wins'));
    if (plan.added.length === 0) {
      askMcp('Nothing to add to ' + plan.path + '.', lines, null);
      return;
    }
    askMcp('Sync adds ' + plural(plan.added.length, 'server', 'servers') + ' to ' + plan.path + ':', lines, async () => {
      const done = await api('POST', '/api/mcp/sync', { agent });
      say('mcp-msg', 'Added ' + (done.added.join(', ') || 'nothing') + ' to ' + done.path + '.', 'ok');
      await loadMcp();
    });
  });
}

const MCP_DECISION_WORDS = {
  would_import: 'would be imported, disabled',
  imported: 'imported, disabled',
  rejected: 'refused',
  collision: 'name taken',
  already_imported: 'imported before',
  duplicate: 'duplicate in this run',
  conflict: 'destination malformed',
};

const MCP_ORIGINS = { claude_code: 'Claude Code', hermes: 'Hermes', openclaw: 'OpenClaw' };

function importLine(row) {
  const name = row.name + (row.imported_as && row.imported_as !== row.name ? ' as ' + row.imported_as : '');
  return name + ' (' + (MCP_ORIGINS[row.origin] || row.origin) + '): ' + (MCP_DECISION_WORDS[row.decision] || row.decision)
    + (row.reason ? ': ' + row.reason : '');
}

async function importMcp() {
  await guarded('mcp-msg', async () => {
    const plan = await api('POST', '/api/mcp/import', { dry_run: true });
    const adds = plan.decisions.filter((row) => row.decision === 'would_import').length;
    const lines = plan.decisions.map(importLine);
    if (adds === 0) {
      askMcp(plan.decisions.length ? 'No server to import.' : 'No Claude Code, Hermes or OpenClaw MCP server was found.', lines, null);
      return;
    }
    askMcp('Import copies ' + plural(adds, 'server', 'servers') + ' into ' + plan.destination + ', disabled:', lines, async () => {
      const done = await api('POST', '/api/mcp/import', {});
      const written = done.decisions.filter((row) => row.decision === 'imported').length;
      say('mcp-msg', 'Imported ' + plural(written, 'server', 'servers') + ', disabled: enable one for an agent to use it.', 'ok');
      await loadMcp();
    });
  });
}

async function applyMcp() {
  const apply = state.mcpPending;
  closeMcpConfirm();
  if (apply) await guarded('mcp-msg', apply);
}

// ---- wiring ------------------------------------------------------------

function wire() {
  $('login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = $('token-input').value.trim();
    if (token) signIn(token);
  });
  $('sign-out').addEventListener('click', () => signOut(''));
  $('revert-run').addEventListener('click', revertLastRun);
  for (const button of document.querySelectorAll('button.tab')) {
    button.addEventListener('click', () => showView(button.dataset.view));
  }
  for (const button of document.querySelectorAll('button.subtab')) {
    button.addEventListener('click', () => showPane(button.dataset.pane));
  }
  $('settings-form').addEventListener('submit', saveSettings);
  $('embed-retry').addEventListener('click', () => guarded('embed-detail', async () => {
    await api('POST', '/api/memory/enable-embeddings');
    await loadEmbedding();
  }));
  $('fact-form').addEventListener('submit', saveFact);
  $('fact-search-form').addEventListener('submit', searchFacts);
  $('fact-clear').addEventListener('click', () => {
    $('fact-q').value = '';
    loadFacts();
  });
  $('fact-more').addEventListener('click', showMoreFacts);
  $('epi-search-form').addEventListener('submit', searchEpisodes);
  $('epi-clear').addEventListener('click', () => {
    $('epi-q').value = '';
    loadEpisodes(0);
  });
  $('epi-prev').addEventListener('click', () => loadEpisodes(Math.max(0, state.episodeOffset - EPISODE_PAGE)));
  $('epi-next').addEventListener('click', () => loadEpisodes(state.episodeOffset + EPISODE_PAGE));
  $('lesson-form').addEventListener('submit', addLesson);
  $('scope-filter').addEventListener('change', scopeChanged);
  $('forget-form').addEventListener('submit', previewForget);
  $('forget-apply').addEventListener('click', applyForget);
  $('forget-cancel').addEventListener('click', () => {
    $('forget-confirm').hidden = true;
    state.forgetPreview = null;
    clear($('forget-list'));
    say('forget-msg', 'Cancelled: nothing was forgotten.', 'ok');
  });
  $('audit-refresh').addEventListener('click', loadAudit);
  $('import-form').addEventListener('submit', scanImport);
  $('import-ask').addEventListener('click', askImport);
  $('import-apply').addEventListener('click', applyImport);
  $('import-cancel').addEventListener('click', () => {
    $('import-confirm').hidden = true;
    $('import-ask').hidden = false;
  });
  $('ctx-form').addEventListener('submit', previewContext);
  $('skill-form').addEventListener('submit', createSkill);
  $('skill-edit').addEventListener('click', editSkill);
  $('skill-audit-refresh').addEventListener('click', loadSkillAudit);
  $('skill-edit-form').addEventListener('submit', saveSkill);
  $('skill-edit-cancel').addEventListener('click', () => {
    $('skill-edit-form').hidden = true;
    $('skill-edit').hidden = false;
  });
  $('agent-template-form').addEventListener('submit', saveAgentTemplate);
  $('agent-projection-form').addEventListener('submit', showProjection);
  $('agent-backend').replaceChildren(...BACKENDS.map((backend) => el('option', { value: backend, text: backend })));
  $('mcp-agent').addEventListener('change', loadMcp);
  $('mcp-probe').addEventListener('click', probeAll);
  $('mcp-sync').addEventListener('click', syncMcp);
  $('mcp-import').addEventListener('click', importMcp);
  $('mcp-confirm-apply').addEventListener('click', applyMcp);
  $('mcp-confirm-cancel').addEventListener('click', closeMcpConfirm);
  $('skill-content').value = SKILL_TEMPLATE;
}

function start() {
  wire();
  takeTokenFromFragment();
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token);
  else signOut('');
}

start();
