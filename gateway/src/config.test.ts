import { ConfigError } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "./config.js";
import { DEFAULT_RATE_LIMITS } from "./rate-limit/rate-limit-settings.js";

const base = {
  IDENTITY_GRPC_URL: "http://127.0.0.1:50051",
  ORGANIZATION_GRPC_URL: "http://127.0.0.1:50052",
  CATALOG_GRPC_URL: "http://127.0.0.1:50053",
  RECORDS_GRPC_URL: "http://127.0.0.1:50054",
  FILES_GRPC_URL: "http://127.0.0.1:50055",
  INTERNAL_JWT_SECRET: "x".repeat(32),
};

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadGatewayConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("gateway configuration", () => {
  it("fills the documented defaults", () => {
    const config = loadGatewayConfig(base);
    expect(config.PORT).toBe(8080);
    expect(config.PUBLIC_BASE_URL).toBeUndefined();
    expect(config.ORGANIZATION_GRPC_URL).toBe("http://127.0.0.1:50052");
    expect(config.CATALOG_GRPC_URL).toBe("http://127.0.0.1:50053");
    expect(config.RECORDS_GRPC_URL).toBe("http://127.0.0.1:50054");
    expect(config.FILES_GRPC_URL).toBe("http://127.0.0.1:50055");
    expect(config.FILE_UPLOAD_MAX_BYTES).toBe(1_000_000_000);
    expect(config.TRUSTED_PROXIES).toEqual([]);
    expect(config.MCP_ALLOWED_HOSTS).toEqual([]);
    expect(config.CORS_ALLOWED_ORIGINS).toEqual([]);
    expect(config.REDIS_URL).toBeUndefined();
    expect(config.NATS_URL).toBeUndefined();
    expect(config.LOG_LEVEL).toBe("info");
    expect(config.RATE_LIMITS).toEqual(DEFAULT_RATE_LIMITS);
    expect(config.ACCESS_TOKEN_TTL_SECONDS).toBe(900);
    expect(config.REQUEST_HEADERS_TIMEOUT_MS).toBe(60_000);
    expect(config.REQUEST_BODY_IDLE_TIMEOUT_MS).toBe(60_000);
    expect(config.REQUEST_BODY_MIN_BYTES_PER_SECOND).toBe(1_000);
  });

  it("takes request timeouts of at least 1 ms, up to what a timer can wait", () => {
    const config = loadGatewayConfig({
      ...base,
      REQUEST_HEADERS_TIMEOUT_MS: "500",
      REQUEST_BODY_IDLE_TIMEOUT_MS: "300",
      REQUEST_BODY_MIN_BYTES_PER_SECOND: "0",
    });
    expect(config.REQUEST_HEADERS_TIMEOUT_MS).toBe(500);
    expect(config.REQUEST_BODY_IDLE_TIMEOUT_MS).toBe(300);
    expect(config.REQUEST_BODY_MIN_BYTES_PER_SECOND).toBe(0);
    expect(
      problemsOf({
        ...base,
        REQUEST_HEADERS_TIMEOUT_MS: "0",
        REQUEST_BODY_IDLE_TIMEOUT_MS: "2147483648",
        REQUEST_BODY_MIN_BYTES_PER_SECOND: "-1",
      }),
    ).toEqual([
      expect.stringMatching(/^REQUEST_HEADERS_TIMEOUT_MS:/),
      expect.stringMatching(/^REQUEST_BODY_IDLE_TIMEOUT_MS:/),
      expect.stringMatching(/^REQUEST_BODY_MIN_BYTES_PER_SECOND:/),
    ]);
  });

  it("takes an empty or blank number as unset, not as 0", () => {
    const config = loadGatewayConfig({
      ...base,
      PORT: "",
      METRICS_PORT: " ",
      USAGE_FLUSH_MS: "",
      ACCESS_TOKEN_TTL_SECONDS: "  ",
    });
    expect(config.PORT).toBe(8080);
    expect(config.METRICS_PORT).toBe(9464);
    expect(config.USAGE_FLUSH_MS).toBe(1_000);
    expect(config.ACCESS_TOKEN_TTL_SECONDS).toBe(900);
    expect(problemsOf({ ...base, PORT: "eighty" })).toEqual([expect.stringContaining("PORT")]);
  });

  it("reads every variable", () => {
    const config = loadGatewayConfig({
      ...base,
      PORT: "0",
      PUBLIC_BASE_URL: "https://api.example.com/",
      TRUSTED_PROXIES: "10.0.0.0/8, 127.0.0.1,loopback",
      MCP_ALLOWED_HOSTS: "rowbase-gateway:8080, Rowbase.internal",
      CORS_ALLOWED_ORIGINS: "https://App.Example.com, http://localhost:3000/,",
      REDIS_URL: "redis://127.0.0.1:6379",
      NATS_URL: "nats://127.0.0.1:4222",
      LOG_LEVEL: "warn",
      RATE_LIMITS: "auth_login_ip=1/1",
      ACCESS_TOKEN_TTL_SECONDS: "60",
    });
    expect(config.PORT).toBe(0);
    expect(config.PUBLIC_BASE_URL).toBe("https://api.example.com");
    expect(config.TRUSTED_PROXIES).toEqual(["10.0.0.0/8", "127.0.0.1", "loopback"]);
    expect(config.MCP_ALLOWED_HOSTS).toEqual(["rowbase-gateway:8080", "rowbase.internal"]);
    // As a browser sends them in Origin.
    expect(config.CORS_ALLOWED_ORIGINS).toEqual([
      "https://app.example.com",
      "http://localhost:3000",
    ]);
    expect(config.REDIS_URL).toBe("redis://127.0.0.1:6379");
    expect(config.NATS_URL).toBe("nats://127.0.0.1:4222");
    expect(config.RATE_LIMITS.auth_login_ip).toEqual({ points: 1, seconds: 1 });
    expect(config.ACCESS_TOKEN_TTL_SECONDS).toBe(60);
  });

  it("lists every bad value at once", () => {
    const problems = problemsOf({
      INTERNAL_JWT_SECRET: "short",
      PUBLIC_BASE_URL: "ftp://example.com",
      TRUSTED_PROXIES: "10.0.0.0/8,not-an-ip",
      RATE_LIMITS: "nope=1/1",
      CORS_ALLOWED_ORIGINS:
        "https://ok.example.com,*,https://app.example.com/path,ftp://x.example.com",
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^IDENTITY_GRPC_URL:/),
        expect.stringMatching(/^ORGANIZATION_GRPC_URL:/),
        expect.stringMatching(/^CATALOG_GRPC_URL:/),
        expect.stringMatching(/^RECORDS_GRPC_URL:/),
        expect.stringMatching(/^FILES_GRPC_URL:/),
        expect.stringMatching(/^INTERNAL_JWT_SECRET: must be at least 32 characters/),
        expect.stringMatching(/^PUBLIC_BASE_URL:/),
        expect.stringMatching(/^TRUSTED_PROXIES: 'not-an-ip'/),
        expect.stringMatching(/^CORS_ALLOWED_ORIGINS: '\*' is not an origin/),
        expect.stringMatching(/^CORS_ALLOWED_ORIGINS: 'https:\/\/app.example.com\/path' is not/),
        expect.stringMatching(/^CORS_ALLOWED_ORIGINS: 'ftp:\/\/x.example.com' is not/),
        expect.stringMatching(/^RATE_LIMITS: unknown rate limit 'nope'/),
      ]),
    );
    expect(problems).toHaveLength(12);
  });
});
