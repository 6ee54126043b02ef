/** One Server-Sent Event, or a comment line (`comment` set, the rest empty). */
export interface StreamEvent {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** An open `text/event-stream` response read event by event. */
export interface EventStreamClient {
  status: number;
  headers: Headers;
  /** The next event or comment; undefined once the server ended the stream. */
  next(): Promise<StreamEvent | undefined>;
  /** Leaves the stream (the client disconnects). */
  close(): void;
}

/** Opens an event stream with fetch and parses its events (the WHATWG format, `\n` lines). */
export async function openEventStream(
  url: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<EventStreamClient> {
  const abort = new AbortController();
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${token}`, ...headers },
    signal: abort.signal,
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const ready: StreamEvent[] = [];
  let done = false;
  const parseBlocks = () => {
    for (;;) {
      const end = buffer.indexOf("\n\n");
      if (end < 0) return;
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event: StreamEvent = {};
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) {
          ready.push({ comment: line.slice(1).trim() });
          continue;
        }
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "id") event.id = value;
        if (name === "event") event.event = value;
        if (name === "data")
          event.data = event.data === undefined ? value : `${event.data}\n${value}`;
      }
      if (event.id !== undefined || event.event !== undefined || event.data !== undefined) {
        ready.push(event);
      }
    }
  };
  return {
    status: response.status,
    headers: response.headers,
    async next() {
      while (ready.length === 0 && !done) {
        const chunk = await reader.read();
        if (chunk.done) {
          done = true;
          break;
        }
        buffer += decoder.decode(chunk.value, { stream: true });
        parseBlocks();
      }
      return ready.shift();
    },
    close() {
      abort.abort();
    },
  };
}

/** The next event that is not a comment; undefined when the stream ended. */
export async function nextEvent(stream: EventStreamClient): Promise<StreamEvent | undefined> {
  for (;;) {
    const event = await stream.next();
    if (event === undefined || event.comment === undefined) return event;
  }
}
