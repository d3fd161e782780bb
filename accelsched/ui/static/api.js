// Fetch helpers for the accelsched ui JSON API. Every call returns parsed JSON or throws an ApiError whose message
// is the server's {"error": "..."} text, so callers can show it as text (never as markup).

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

async function parse(response) {
  let body = null;
  const text = await response.text();
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (!response.ok) {
    const message = body && typeof body.error === "string" ? body.error : `HTTP ${response.status}`;
    throw new ApiError(message, response.status);
  }
  if (body === null) throw new ApiError("the server sent no JSON", response.status);
  return body;
}

// This page's id for the server's engine requests: a newer explain or what-if of the same page supersedes the older
// one there (it stops, and gives its slot to the newer), as the page aborts the older fetch here.
const CLIENT = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;

export async function getJSON(url, { signal } = {}) {
  const response = await fetch(url, { headers: { Accept: "application/json", "X-Accelsched-Client": CLIENT }, signal,
    cache: "no-store" });
  return parse(response);
}

export async function postJSON(url, payload, { signal } = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-Accelsched-Client": CLIENT },
    body: JSON.stringify(payload),
    signal,
    cache: "no-store",
  });
  return parse(response);
}

/** The full view, or the delta since version `since` (the server decides which; see app.js applyDelta). */
export function getState(since) {
  return getJSON(since == null ? "/api/state" : `/api/state?since=${encodeURIComponent(since)}`);
}

export function getPod(key) {
  return getJSON(`/api/pod?key=${encodeURIComponent(key)}`);
}

export function getExplain(key, options) {
  return getJSON(`/api/explain?pod=${encodeURIComponent(key)}`, options);
}

export function postWhatif(body, options) {
  return postJSON("/api/whatif", body, options);
}

/** Memoise pod details per state version: hovering across a row asks for the same few pods again and again. */
export class PodCache {
  constructor() {
    this.version = null;
    this.entries = new Map();
  }

  get(key, version) {
    if (version !== this.version) {
      this.version = version;
      this.entries.clear();
    }
    let entry = this.entries.get(key);
    if (!entry) {
      entry = getPod(key).catch((err) => {
        this.entries.delete(key);
        throw err;
      });
      this.entries.set(key, entry);
    }
    return entry;
  }

  peek(key, version) {
    return version === this.version ? this.entries.get(key) : undefined;
  }
}
