export interface ApiResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  body?: unknown;
  /** Sent as-is instead of JSON.stringify(body). */
  rawBody?: string;
  token?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
}

/** A small HTTP client for black-box tests: JSON in, parsed JSON (when it is JSON) out. */
export function client(baseUrl: string) {
  // biome-ignore lint/suspicious/noExplicitAny: tests inspect response bodies freely
  return async function api<T = any>(
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<ApiResponse<T>> {
    const url = new URL(path, baseUrl);
    for (const [key, value] of Object.entries(options.query ?? {}))
      url.searchParams.set(key, value);
    const headers: Record<string, string> = { ...options.headers };
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] ??= "application/json";
    }
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    const response = await fetch(url, { method, headers, body, redirect: "manual" });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: response.status, headers: response.headers, body: parsed as T, text };
  };
}
