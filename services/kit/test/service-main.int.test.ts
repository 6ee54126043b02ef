import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const FIXTURE = fileURLToPath(new URL("./fixtures/failing-stop-main.ts", import.meta.url));

interface LogLine {
  level: number;
  msg: string;
  step?: string;
  err?: { message?: string };
}

it("logs a shutdown step that fails, still runs the later ones and exits non-zero", async () => {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--conditions=@rowbase/source", FIXTURE],
    {
      env: {
        ...process.env,
        METRICS_PORT: "0",
        DATABASE_URL: "postgres://postgres@127.0.0.1:5432/unused",
        REDIS_URL: "",
        NATS_URL: "",
        OTEL_EXPORTER_OTLP_ENDPOINT: "",
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  await expect.poll(() => stdout, { timeout: 20_000 }).toContain("failing-stop listening");
  child.kill("SIGTERM");
  const [code] = await exited;

  expect(code, stderr).toBe(1);
  const logged = stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine);
  expect(logged).toContainEqual(
    expect.objectContaining({
      level: 50,
      msg: "shutdown step failed",
      step: "service",
      err: expect.objectContaining({ message: "the service would not stop" }),
    }),
  );
  // The cache is closed after the service and the bus: the steps after the failed one ran.
  expect(stdout).toContain("cache closed\n");
}, 40_000);
