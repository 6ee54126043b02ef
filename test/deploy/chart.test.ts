import { execFileSync, spawnSync } from "node:child_process";
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { catalogEnv } from "@rowbase/catalog";
import { filesEnv } from "@rowbase/files";
import { gatewayEnv } from "@rowbase/gateway";
import { identityEnv } from "@rowbase/identity";
import { organizationEnv } from "@rowbase/organization";
import { recordsEnv } from "@rowbase/records";
import { webhooksEnv } from "@rowbase/webhooks";
import { Ajv } from "ajv";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler";
import { Job } from "kubernetes-models/batch/v1/Job";
import { Ingress } from "kubernetes-models/networking.k8s.io/v1/Ingress";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { Pod } from "kubernetes-models/v1/Pod";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { ServiceAccount } from "kubernetes-models/v1/ServiceAccount";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments, stringify } from "yaml";

// Renders the charts with the real helm that deploy/check-chart.sh unpacks into .tools/, and
// checks what matters in the manifests. CI runs that script first (.ci/run), so there a missing
// binary is a failure; on a developer machine without it these tests are skipped.

const root = path.resolve(import.meta.dirname, "../..");
const chart = path.join(root, "helm/rowbase");
const helm = process.env.HELM ?? path.join(root, ".tools/helm");
const haveHelm = existsSync(helm);

// biome-ignore lint/suspicious/noExplicitAny: rendered YAML is walked generically.
type Manifest = Record<string, any>;

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "v1/ConfigMap": ConfigMap,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "v1/Pod": Pod,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/ServiceAccount": ServiceAccount,
  "apps/v1/Deployment": Deployment,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "batch/v1/Job": Job,
  "networking.k8s.io/v1/Ingress": Ingress,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
};

/**
 * Custom resources have no kubernetes-models class: the fields the chart sets are checked
 * against the CRD's own names and types (prometheus-operator's ServiceMonitor, monitoring.coreos.com/v1).
 */
const CUSTOM_RESOURCES: Record<string, object> = {
  "monitoring.coreos.com/v1/ServiceMonitor": {
    type: "object",
    required: ["metadata", "spec"],
    properties: {
      spec: {
        type: "object",
        additionalProperties: false,
        required: ["selector", "endpoints"],
        properties: {
          jobLabel: { type: "string" },
          namespaceSelector: {
            type: "object",
            properties: { matchNames: { type: "array", items: { type: "string" } } },
          },
          selector: {
            type: "object",
            properties: {
              matchLabels: { type: "object", additionalProperties: { type: "string" } },
            },
          },
          endpoints: {
            type: "array",
            minItems: 1,
            items: {
              type: "object",
              additionalProperties: false,
              required: ["port"],
              properties: {
                port: { type: "string" },
                path: { type: "string", pattern: "^/" },
                scheme: { enum: ["http", "https"] },
                interval: { type: "string", pattern: "^([0-9]+(ms|s|m|h))+$" },
                scrapeTimeout: { type: "string", pattern: "^([0-9]+(ms|s|m|h))+$" },
              },
            },
          },
        },
      },
    },
  },
};

/** The setups CI supports, each a values file layered over values.yaml. */
const SETUPS = [
  ...readdirSync(path.join(root, "deploy/ci-values"))
    .filter((file) => file.endsWith(".yaml"))
    .map((file) => `deploy/ci-values/${file}`),
  "deploy/values-kind.yaml",
];

/** Every process, each run by its own Deployment in every setup. */
const PROCESSES = [
  "gateway",
  "identity",
  "organization",
  "catalog",
  "records",
  "files",
  "webhooks",
];

/**
 * The environment schema each process parses at start (its src/config.ts): a Deployment's
 * environment must pass it, as must each migration step's (`migrate` reads the whole config).
 */
const ENV_SCHEMAS = {
  gateway: gatewayEnv,
  identity: identityEnv,
  organization: organizationEnv,
  catalog: catalogEnv,
  records: recordsEnv,
  files: filesEnv,
  webhooks: webhooksEnv,
};
type EnvSchema = (typeof ENV_SCHEMAS)[keyof typeof ENV_SCHEMAS];
function envSchemaOf(name: string): EnvSchema {
  expect(Object.keys(ENV_SCHEMAS), `${name} has an environment schema`).toContain(name);
  return ENV_SCHEMAS[name as keyof typeof ENV_SCHEMAS];
}

/** The variables a schema declares (through refinements and transforms). */
function declaredKeys(schema: EnvSchema): string[] {
  // biome-ignore lint/suspicious/noExplicitAny: zod's definitions are walked generically.
  let def: any = schema._zod.def;
  while (def.type === "pipe") def = def.in._zod.def;
  return Object.keys(def.shape);
}

/**
 * Stand-ins for secrets kept in Secrets the chart does not render (existingSecret): values of
 * the right form, so that the schema judges what the chart wires, not what a user keeps.
 */
const OUTSIDE_SECRETS: Record<string, string> = {
  DATABASE_URL: "postgres://rowbase:secret@postgres:5432/rowbase",
  REDIS_URL: "redis://redis:6379",
  NATS_URL: "nats://nats:4222",
  INTERNAL_JWT_SECRET: "i".repeat(48),
  INTERNAL_JWT_SECRET_PREVIOUS: "p".repeat(48),
  FILE_URL_SECRET: "f".repeat(48),
  JWT_SIGNING_KEYS: JSON.stringify([
    {
      ...generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" }),
      kid: "outside",
    },
  ]),
  SMTP_URL: "smtp://mailer:secret@smtp:587",
  OIDC_CLIENT_SECRET: "oidc-secret",
  S3_ACCESS_KEY_ID: "AKIAEXAMPLE",
  S3_SECRET_ACCESS_KEY: "s3-secret",
};

function helmTemplate(chartDir: string, release: string, args: string[]): Manifest[] {
  const out = execFileSync(
    helm,
    ["template", release, chartDir, "--namespace", "rowbase", ...args],
    {
      cwd: root,
      encoding: "utf8",
      maxBuffer: 32 * 1024 * 1024,
    },
  );
  return parseAllDocuments(out).flatMap((doc) => {
    expect(doc.errors).toEqual([]);
    const value = doc.toJS() as Manifest | null;
    return value ? [value] : [];
  });
}

const renders = new Map<string, Manifest[]>();
function render(setup: string): Manifest[] {
  let manifests = renders.get(setup);
  if (!manifests) {
    manifests = helmTemplate(chart, "rowbase", ["-f", setup]);
    renders.set(setup, manifests);
  }
  return manifests;
}

const ofKind = (manifests: Manifest[], kind: string) => manifests.filter((m) => m.kind === kind);
const named = (manifests: Manifest[], kind: string, name: string) =>
  manifests.find((m) => m.kind === kind && m.metadata.name === name);
const componentOf = (m: Manifest): string =>
  m.spec?.template?.metadata?.labels?.["app.kubernetes.io/component"] ??
  m.metadata.labels["app.kubernetes.io/component"];
const hookOf = (m: Manifest): string[] =>
  (m.metadata.annotations?.["helm.sh/hook"] ?? "").split(",").filter(Boolean);
const hookWeight = (m: Manifest) => Number(m.metadata.annotations?.["helm.sh/hook-weight"] ?? 0);
const decode = (value: string) => Buffer.from(value, "base64").toString("utf8");

function containersOf(podSpec: Manifest): Manifest[] {
  return [...(podSpec.initContainers ?? []), ...podSpec.containers];
}

function expectHardened(podSpec: Manifest, where: string) {
  const pod = podSpec.securityContext;
  expect(pod?.runAsNonRoot, `${where}: pod runAsNonRoot`).toBe(true);
  expect(pod?.runAsUser, `${where}: pod runAsUser`).toBeGreaterThan(0);
  expect(pod?.seccompProfile?.type, `${where}: seccomp`).toBe("RuntimeDefault");
  expect(podSpec.automountServiceAccountToken, `${where}: no API token`).toBe(false);
  for (const container of containersOf(podSpec)) {
    const sc = container.securityContext;
    const label = `${where}/${container.name}`;
    expect(sc?.readOnlyRootFilesystem, `${label}: read-only root`).toBe(true);
    expect(sc?.allowPrivilegeEscalation, `${label}: no privilege escalation`).toBe(false);
    expect(sc?.capabilities?.drop, `${label}: capabilities`).toContain("ALL");
    expect(container.resources?.requests?.memory, `${label}: memory request`).toBeTruthy();
    expect(container.resources?.limits?.memory, `${label}: memory limit`).toBeTruthy();
  }
}

/** Every secretKeyRef names a rendered Secret that has the key, or a Secret made outside it. */
function expectSecretRefsResolve(manifests: Manifest[], podSpec: Manifest, where: string) {
  for (const container of containersOf(podSpec)) {
    for (const env of container.env ?? []) {
      const ref = env.valueFrom?.secretKeyRef;
      if (!ref) continue;
      const secret = named(manifests, "Secret", ref.name);
      if (secret) {
        expect(Object.keys(secret.data ?? {}), `${where}: ${env.name} in ${ref.name}`).toContain(
          ref.key,
        );
      } else {
        expect(ref.name, `${where}: ${env.name} names the chart's Secret, not rendered`).not.toBe(
          "rowbase-secrets",
        );
      }
    }
  }
}

/**
 * A container's environment as the process sees it: its ConfigMap, then its own entries
 * (Kubernetes lets `env` win over `envFrom`), secrets read from the rendered Secret or, for
 * Secrets made outside the chart, a stand-in.
 */
function environmentOf(manifests: Manifest[], container: Manifest): Record<string, string> {
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    Object.assign(env, named(manifests, "ConfigMap", source.configMapRef.name)!.data);
  }
  for (const entry of container.env ?? []) {
    const ref = entry.valueFrom?.secretKeyRef;
    if (!ref) {
      env[entry.name] = entry.value;
      continue;
    }
    const secret = named(manifests, "Secret", ref.name);
    const value = secret ? secret.data?.[ref.key] : undefined;
    env[entry.name] = value !== undefined ? decode(value) : OUTSIDE_SECRETS[entry.name]!;
    expect(env[entry.name], `${entry.name}: no stand-in for a Secret made outside`).toBeDefined();
  }
  return env;
}

/** The schema's verdict on an environment: [] when it parses, else its problems. */
function problemsOf(schema: EnvSchema, env: Record<string, string>): string[] {
  const result = schema.safeParse(env);
  return result.success
    ? []
    : result.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
}

describe("helm binary", () => {
  it("is present (bash deploy/check-chart.sh fetches it)", (ctx) => {
    if (!haveHelm && !process.env.CI) ctx.skip("no helm: run `bash deploy/check-chart.sh` first");
    expect(existsSync(helm), `${helm} is missing: .ci/run runs deploy/check-chart.sh first`).toBe(
      true,
    );
  });
});

describe.skipIf(!haveHelm)("the rowbase chart, rendered", () => {
  it("stops on default values and names the data stores a real installation needs", () => {
    const result = spawnSync(helm, ["template", "rowbase", chart], { encoding: "utf8" });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain("database.url or database.existingSecret");
    expect(result.stderr).toContain("redis.url or redis.existingSecret");
    expect(result.stderr).toContain("nats.url or nats.existingSecret");
  });

  it("refuses values the schema does not know (helm enforces values.schema.json)", () => {
    const typo = spawnSync(
      helm,
      ["template", "rowbase", chart, "-f", SETUPS[0]!, "--set", "gateway.replicas=2"],
      {
        cwd: root,
        encoding: "utf8",
      },
    );
    expect(typo.status).not.toBe(0);
    expect(typo.stderr).toContain("'replicas' not allowed");
  });

  describe.each(SETUPS)("%s", (setup) => {
    it("renders manifests that are valid Kubernetes objects", () => {
      const manifests = render(setup);
      expect(manifests.length).toBeGreaterThan(10);
      for (const manifest of manifests) {
        const custom = CUSTOM_RESOURCES[`${manifest.apiVersion}/${manifest.kind}`];
        if (custom) {
          const validate = new Ajv({ allErrors: true }).compile(custom);
          expect(validate(manifest), JSON.stringify(validate.errors)).toBe(true);
          continue;
        }
        const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`];
        expect(Model, `no model for ${manifest.apiVersion} ${manifest.kind}`).toBeDefined();
        expect(() => new Model!(manifest as never).validate()).not.toThrow();
      }
    });

    it("gives every Deployment probes, resources, a hardened non-root pod and matching selectors", () => {
      const manifests = render(setup);
      const deployments = ofKind(manifests, "Deployment");
      expect(deployments.map(componentOf).sort()).toEqual([...PROCESSES].sort());
      for (const deployment of deployments) {
        const name = deployment.metadata.name;
        const component = componentOf(deployment);
        const podSpec = deployment.spec.template.spec;
        const podLabels = deployment.spec.template.metadata.labels;
        const selector = deployment.spec.selector.matchLabels;

        expect(podLabels, `${name}: selector matches the pod template`).toMatchObject(selector);
        expect(selector["app.kubernetes.io/component"]).toBe(component);
        expect(Object.keys(selector), `${name}: selector must not change on upgrade`).not.toContain(
          "app.kubernetes.io/version",
        );
        for (const spread of podSpec.topologySpreadConstraints ?? []) {
          expect(podLabels, `${name}: spread over its own pods`).toMatchObject(
            spread.labelSelector.matchLabels,
          );
        }
        expectHardened(podSpec, name);
        expect(
          podSpec.volumes.find((v: Manifest) => v.name === "tmp")?.emptyDir,
          `${name}: /tmp is an emptyDir`,
        ).toBeDefined();

        expect(podSpec.containers).toHaveLength(1);
        const [container] = podSpec.containers;
        expect(container.volumeMounts).toContainEqual({ name: "tmp", mountPath: "/tmp" });
        // Every mount is a volume of the pod; the files directory is a mounted volume.
        for (const mount of container.volumeMounts) {
          expect(
            podSpec.volumes.map((v: Manifest) => v.name),
            `${name}: ${mount.name}`,
          ).toContain(mount.name);
        }
        const filesDir = environmentOf(manifests, container).FILES_DIR;
        if (filesDir !== undefined) {
          const mount = container.volumeMounts.find((m: Manifest) => m.mountPath === filesDir);
          expect(mount, `${name}: FILES_DIR ${filesDir} is a mounted volume`).toBeDefined();
          const volume = podSpec.volumes.find((v: Manifest) => v.name === mount.name);
          expect(
            volume.persistentVolumeClaim ?? volume.emptyDir,
            `${name}: files volume`,
          ).toBeDefined();
          expect(mount.readOnly).toBeFalsy();
        }
        const [port] = container.ports;
        if (component === "gateway") {
          // /health for readiness too: with one service down the gateway still serves the
          // routes of the others (and /health/ready answers 503).
          for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
            expect(container[probe].httpGet, probe).toMatchObject({
              path: "/health",
              port: "http",
            });
          }
        } else {
          for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
            expect(container[probe]?.grpc?.port, `${name}: ${probe} on grpc.health.v1`).toBe(
              port.containerPort,
            );
          }
        }

        // SIGTERM comes after preStop; the gateway then drains for at most 10 s.
        const preStop = Number(container.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
        expect(podSpec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStop + 10);

        const service = named(manifests, "Service", name);
        expect(service, `${name}: Service`).toBeDefined();
        expect(podLabels).toMatchObject(service!.spec.selector);
        expect(service!.spec.ports[0].targetPort).toBe(port.name);

        const configMap = container.envFrom?.[0]?.configMapRef?.name;
        expect(named(manifests, "ConfigMap", configMap), `${name}: ConfigMap`).toBeDefined();
        expectSecretRefsResolve(manifests, podSpec, name);
      }
    });

    it("gives every process the environment its own config schema accepts", () => {
      const manifests = render(setup);
      for (const deployment of ofKind(manifests, "Deployment")) {
        const component = componentOf(deployment);
        const schema = envSchemaOf(component);
        const env = environmentOf(manifests, deployment.spec.template.spec.containers[0]);
        expect(problemsOf(schema, env), `${deployment.metadata.name}`).toEqual([]);
        // Optional ones included: every service a process can call is wired (all run here).
        const calls = (keys: string[]) => keys.filter((key) => key.endsWith("_GRPC_URL")).sort();
        expect(calls(Object.keys(env)), `${component}: <SERVICE>_GRPC_URL`).toEqual(
          calls(declaredKeys(schema)),
        );
      }
    });

    it("lets every service listen on each address family its pod has (IPv6-only clusters too)", () => {
      const manifests = render(setup);
      for (const deployment of ofKind(manifests, "Deployment")) {
        const component = componentOf(deployment);
        if (component === "gateway") continue;
        const env = environmentOf(manifests, deployment.spec.template.spec.containers[0]);
        const parsed = envSchemaOf(component).parse(env) as { GRPC_HOST?: string };
        // 0.0.0.0 is IPv4 only: a pod with only an IPv6 address (or a Service of an IPv6-first
        // cluster) would reach no gRPC port, while the gateway and /metrics listen on both.
        expect(parsed.GRPC_HOST, `${component}: GRPC_HOST`).toBeUndefined();
      }
    });

    it("wires <SERVICE>_GRPC_URL to the Service of that service and port", () => {
      const manifests = render(setup);
      const urls = ofKind(manifests, "ConfigMap").flatMap((cm) =>
        Object.entries(cm.data as Record<string, string>).filter(([key]) =>
          key.endsWith("_GRPC_URL"),
        ),
      );
      expect(urls.length).toBeGreaterThanOrEqual(4);
      for (const [key, value] of urls) {
        const url = new URL(value);
        expect(url.protocol).toBe("http:");
        const service = named(manifests, "Service", url.hostname);
        expect(service, `${key}=${value}: no such Service`).toBeDefined();
        expect(service!.spec.ports[0].port).toBe(Number(url.port));
        expect(service!.spec.selector["app.kubernetes.io/component"]).toBe(
          key.replace(/_GRPC_URL$/, "").toLowerCase(),
        );
      }
    });

    it("migrates every enabled service in a pre-install/pre-upgrade hook Job that runs `migrate`", () => {
      const manifests = render(setup);
      const jobs = ofKind(manifests, "Job");
      expect(jobs).toHaveLength(1);
      const [job] = jobs;
      expect(hookOf(job!)).toEqual(expect.arrayContaining(["pre-install", "pre-upgrade"]));
      const podSpec = job!.spec.template.spec;
      expectHardened(podSpec, "migrations");

      const services = ofKind(manifests, "Deployment").filter((d) => componentOf(d) !== "gateway");
      const steps = containersOf(podSpec);
      expect(steps.map((c) => c.args)).toEqual(
        expect.arrayContaining(
          services.map((d) => [d.spec.template.spec.containers[0].args[0], "migrate"]),
        ),
      );
      expect(steps).toHaveLength(services.length);
      for (const step of steps) {
        // A pre-install hook runs before ordinary resources exist: nothing but hooks and
        // Secrets made outside the chart may feed it.
        expect(step.envFrom, `${step.name}: no ConfigMap`).toBeUndefined();
        for (const env of step.env) {
          const ref = env.valueFrom?.secretKeyRef;
          if (!ref) continue;
          const secret = named(manifests, "Secret", ref.name);
          if (!secret) continue;
          expect(hookOf(secret), `${ref.name} must exist before the Job`).toContain("pre-install");
          expect(hookWeight(secret)).toBeLessThan(hookWeight(job!));
        }
      }
      expectSecretRefsResolve(manifests, podSpec, "migrations");
      for (const step of steps) {
        const schema = envSchemaOf(step.name.replace(/^migrate-/, ""));
        expect(problemsOf(schema, environmentOf(manifests, step)), step.name).toEqual([]);
      }
    });

    it("has a helm test pod that checks the gateway's /health/ready", () => {
      const manifests = render(setup);
      const pods = ofKind(manifests, "Pod");
      expect(pods).toHaveLength(1);
      const [pod] = pods;
      expect(hookOf(pod!)).toEqual(["test"]);
      expectHardened(pod!.spec, "test");
      const url = new URL(pod!.spec.containers[0].env[0].value);
      expect(url.pathname).toBe("/health/ready");
      const gateway = named(manifests, "Service", url.hostname);
      expect(gateway?.spec.selector["app.kubernetes.io/component"]).toBe("gateway");
      expect(Number(url.port)).toBe(gateway!.spec.ports[0].port);
    });

    it("gives each NetworkPolicy the process's own pods, only when enabled", () => {
      const manifests = render(setup);
      const values = mergedValues(setup);
      const policies = ofKind(manifests, "NetworkPolicy");
      const deployments = ofKind(manifests, "Deployment");
      if (!values.networkPolicy.enabled) {
        expect(policies).toEqual([]);
        return;
      }
      expect(policies).toHaveLength(deployments.length);
      for (const deployment of deployments) {
        const policy = named(manifests, "NetworkPolicy", deployment.metadata.name);
        expect(policy?.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
        expect(policy?.spec.policyTypes).toEqual(["Ingress", "Egress"]);
      }
    });
  });

  it("lets only the gateway and a service's callers reach it, with NetworkPolicies on", () => {
    const manifests = render("deploy/ci-values/shared-volume.yaml");
    const allowedCallers = (component: string) =>
      named(manifests, "NetworkPolicy", `rowbase-${component}`)!
        .spec.ingress.flatMap((rule: Manifest) => rule.from ?? [])
        .map((peer: Manifest) => peer.podSelector.matchLabels["app.kubernetes.io/component"])
        .sort();
    expect(allowedCallers("identity")).toEqual(["gateway", "organization"]);
    expect(allowedCallers("organization")).toEqual([
      "catalog",
      "files",
      "gateway",
      "records",
      "webhooks",
    ]);
    expect(allowedCallers("catalog")).toEqual([
      "files",
      "gateway",
      "organization",
      "records",
      "webhooks",
    ]);
    expect(allowedCallers("records")).toEqual([
      "catalog",
      "files",
      "gateway",
      "organization",
      "webhooks",
    ]);
    expect(allowedCallers("files")).toEqual(["gateway", "organization", "records"]);
    expect(allowedCallers("webhooks")).toEqual(["gateway"]);

    const egressPorts = (component: string) =>
      named(manifests, "NetworkPolicy", `rowbase-${component}`)!
        .spec.egress.flatMap((rule: Manifest) => (rule.ports ?? []).map((p: Manifest) => p.port))
        .sort();
    // The gateway has no database but publishes usage events; every service has one.
    expect(egressPorts("gateway")).not.toContain(5432);
    expect(egressPorts("gateway")).toEqual(
      expect.arrayContaining([53, 6379, 4222, 50051, 50052, 50053, 50054, 50055]),
    );
    expect(egressPorts("catalog")).toEqual(
      expect.arrayContaining([53, 5432, 6379, 4222, 50052, 50054]),
    );
    expect(egressPorts("organization")).toEqual(
      expect.arrayContaining([50051, 50053, 50054, 50055]),
    );
    expect(egressPorts("records")).toEqual(expect.arrayContaining([50052, 50053, 50055]));
    expect(egressPorts("files")).toEqual(expect.arrayContaining([50052, 50053, 50054]));
    // Webhook receivers are anywhere: the service checks each connection's address itself.
    const webhooksEgress = named(manifests, "NetworkPolicy", "rowbase-webhooks")!.spec.egress;
    expect(webhooksEgress).toContainEqual({
      to: [{ ipBlock: { cidr: "0.0.0.0/0" } }, { ipBlock: { cidr: "::/0" } }],
    });
    // Every egress to a process goes to the pods of a process it calls, on that port.
    for (const policy of ofKind(manifests, "NetworkPolicy")) {
      for (const rule of policy.spec.egress) {
        for (const peer of rule.to ?? []) {
          const callee = peer.podSelector?.matchLabels?.["app.kubernetes.io/component"];
          if (!callee) continue;
          const service = named(manifests, "Service", `rowbase-${callee}`)!;
          expect(rule.ports).toEqual([{ port: service.spec.ports[0].port, protocol: "TCP" }]);
        }
      }
    }

    // Files on S3: files may reach the endpoint's port, and no other process may.
    const s3 = render("deploy/ci-values/s3.yaml");
    const s3Ports = (component: string) =>
      named(s3, "NetworkPolicy", `rowbase-${component}`)!.spec.egress.flatMap((rule: Manifest) =>
        (rule.ports ?? []).map((p: Manifest) => p.port),
      );
    expect(s3Ports("files")).toContain(9000);
    expect(s3Ports("records")).not.toContain(9000);
    expect(egressPorts("files")).not.toContain(9000);

    // The stores' ports come from their URLs (Redis on 6380 here) unless rules are given.
    const external = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/external.yaml",
      "--set",
      "networkPolicy.enabled=true",
    ]);
    const externalPorts = named(external, "NetworkPolicy", "rowbase-catalog")!.spec.egress.flatMap(
      (rule: Manifest) => (rule.ports ?? []).map((p: Manifest) => p.port),
    );
    expect(externalPorts).toEqual(expect.arrayContaining([5432, 6380, 4222]));
    expect(externalPorts).not.toContain(6379);
  });

  it("lets mail, OpenID sign-in and traces out on the ports of their URLs, with NetworkPolicies on", () => {
    const egressPorts = (manifests: Manifest[], component: string) =>
      named(manifests, "NetworkPolicy", `rowbase-${component}`)!.spec.egress.flatMap(
        (rule: Manifest) => (rule.ports ?? []).map((p: Manifest) => p.port),
      );
    const given = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/external.yaml",
      "--set",
      "networkPolicy.enabled=true",
      "--set",
      "mail.smtpUrl=smtp://mailer:secret@smtp.example.com:2525",
      "--set",
      "identity.oidc.issuer=https://login.example.com:8443/realms/rowbase",
      "--set",
      "tracing.otlpEndpoint=https://otel.example.com:4319",
    ]);
    for (const component of ["identity", "organization"]) {
      expect(egressPorts(given, component), component).toContain(2525);
    }
    expect(egressPorts(given, "identity")).toContain(8443);
    expect(egressPorts(given, "catalog")).not.toContain(2525);
    for (const process of PROCESSES) expect(egressPorts(given, process)).toContain(4319);

    // Without a port, the scheme's; with the URL in a Secret, SMTP's two usual ports.
    const usual = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/external.yaml",
      "--set",
      "networkPolicy.enabled=true",
      "--set",
      "mail.smtpUrl=smtps://mailer:secret@smtp.example.com",
      "--set",
      "tracing.otlpEndpoint=http://otel.monitoring",
    ]);
    expect(egressPorts(usual, "organization")).toContain(465);
    expect(egressPorts(usual, "organization")).not.toContain(587);
    expect(egressPorts(usual, "identity")).toContain(443);
    expect(egressPorts(usual, "gateway")).toContain(80);
    const inSecret = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/external.yaml",
      "--set",
      "networkPolicy.enabled=true",
      "--set",
      "mail.existingSecret=rowbase-smtp",
    ]);
    expect(egressPorts(inSecret, "identity")).toEqual(expect.arrayContaining([587, 465]));
  });

  it("narrows the gateway's callers to the configured peers and the test pod", () => {
    const manifests = render("deploy/ci-values/network-policies.yaml");
    const [rule] = named(manifests, "NetworkPolicy", "rowbase-gateway")!.spec.ingress;
    expect(rule.from).toEqual([
      { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress-nginx" } } },
      {
        podSelector: {
          matchLabels: {
            "app.kubernetes.io/name": "rowbase",
            "app.kubernetes.io/instance": "rowbase",
            "app.kubernetes.io/component": "test",
          },
        },
      },
    ]);
  });

  it("serves every process's /metrics inside the cluster, scraped by the optional ServiceMonitor", () => {
    const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
      Object.entries(selector).every(([key, value]) => labels?.[key] === value);
    const metricsPort = (service: Manifest) =>
      service.spec.ports.find((p: Manifest) => p.name === "metrics");
    for (const setup of SETUPS) {
      const manifests = render(setup);
      const values = mergedValues(setup);
      expect(ofKind(manifests, "ServiceMonitor"), setup).toHaveLength(
        values.metrics.serviceMonitor.enabled ? 1 : 0,
      );
      for (const service of ofKind(manifests, "Service")) {
        if (service.spec.type !== "ClusterIP") expect(metricsPort(service), setup).toBeUndefined();
      }
      for (const deployment of ofKind(manifests, "Deployment")) {
        const where = `${setup}: ${deployment.metadata.name}`;
        const container = deployment.spec.template.spec.containers[0];
        const port = container.ports.find((p: Manifest) => p.name === "metrics");
        const config = named(manifests, "ConfigMap", container.envFrom[0].configMapRef.name)!;
        expect(Number(config.data.METRICS_PORT), where).toBe(port?.containerPort);
        expect(config.data.OTEL_EXPORTER_OTLP_ENDPOINT, where).toBe(
          values.tracing.otlpEndpoint || undefined,
        );
        const scraped = ofKind(manifests, "Service").filter(
          (s) =>
            selects(s.spec.selector, deployment.spec.template.metadata.labels) && metricsPort(s),
        );
        expect(scraped, where).toHaveLength(1);
        expect(metricsPort(scraped[0]!).targetPort).toBe("metrics");
      }
    }

    const manifests = render("deploy/ci-values/observability.yaml");
    const [monitor] = ofKind(manifests, "ServiceMonitor");
    expect(monitor!.metadata.labels.release).toBe("kube-prometheus-stack");
    expect(monitor!.spec.endpoints).toEqual([
      expect.objectContaining({ port: "metrics", path: "/metrics", interval: "15s" }),
    ]);
    const scraped = ofKind(manifests, "Service").filter(
      (s) => selects(monitor!.spec.selector.matchLabels, s.metadata.labels) && metricsPort(s),
    );
    expect(scraped.map(componentOf).sort()).toEqual([...PROCESSES].sort());
    // The gateway is behind a LoadBalancer: its metrics port is on a ClusterIP Service apart.
    expect(named(manifests, "Service", "rowbase-gateway-metrics")?.spec.type).toBe("ClusterIP");

    // With NetworkPolicies, the monitoring namespace may scrape and the collector is reachable.
    for (const policy of ofKind(manifests, "NetworkPolicy")) {
      expect(policy.spec.ingress).toContainEqual({
        ports: [{ port: "metrics", protocol: "TCP" }],
        from: [
          { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } },
        ],
      });
      expect(
        policy.spec.egress.flatMap((rule: Manifest) =>
          (rule.ports ?? []).map((p: Manifest) => p.port),
        ),
      ).toContain(4318);
    }
  });

  it("gives the busy processes a larger young generation and request, kept beside a user's env", () => {
    const nodeOptions = (manifests: Manifest[], name: string) =>
      named(manifests, "ConfigMap", `rowbase-${name}`)!.data.NODE_OPTIONS;
    const manifests = render("deploy/ci-values/ingress.yaml");
    for (const name of ["records", "gateway", "organization"]) {
      expect(nodeOptions(manifests, name), name).toBe("--max-semi-space-size=16");
    }
    for (const name of ["identity", "catalog", "files"]) {
      expect(nodeOptions(manifests, name), name).toBeUndefined();
    }
    // They request the memory they hold under load; every process keeps the defaults' limit.
    const resources = (name: string) =>
      named(manifests, "Deployment", `rowbase-${name}`)!.spec.template.spec.containers[0].resources;
    expect(resources("records")).toEqual({
      requests: { cpu: "100m", memory: "256Mi" },
      limits: { memory: "512Mi" },
    });
    expect(resources("identity").limits).toEqual(resources("records").limits);
    const own = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/ingress.yaml",
      "--set",
      "records.env.EXTRA=1",
      "--set",
      "serviceDefaults.env.SHARED=2",
    ]);
    const records = named(own, "ConfigMap", "rowbase-records")!.data;
    expect(records).toMatchObject({ NODE_OPTIONS: "--max-semi-space-size=16", EXTRA: "1" });
    expect(records.SHARED).toBe("2");
  });

  it("routes the Ingress to the gateway Service, derives PUBLIC_BASE_URL from its host, lets /mcp answer the names listed", () => {
    const manifests = render("deploy/ci-values/ingress.yaml");
    const [ingress] = ofKind(manifests, "Ingress");
    const backend = ingress!.spec.rules[0].http.paths[0].backend.service;
    const gateway = named(manifests, "Service", backend.name);
    expect(gateway?.spec.selector["app.kubernetes.io/component"]).toBe("gateway");
    expect(backend.port.number).toBe(gateway!.spec.ports[0].port);
    const gatewayConfig = named(manifests, "ConfigMap", "rowbase-gateway")!.data;
    expect(gatewayConfig.PUBLIC_BASE_URL).toBe("https://api.rowbase.example.com");
    expect(gatewayConfig.MCP_ALLOWED_HOSTS).toBe("rowbase-gateway:8080");
    expect(
      named(render("deploy/ci-values/external.yaml"), "ConfigMap", "rowbase-gateway")!.data,
    ).not.toHaveProperty("MCP_ALLOWED_HOSTS");
  });

  it("passes the CORS origins to the gateway only when some are set", () => {
    const manifests = render("deploy/ci-values/ingress.yaml");
    expect(named(manifests, "ConfigMap", "rowbase-gateway")!.data.CORS_ALLOWED_ORIGINS).toBe(
      undefined,
    );
    const origins = "https://app.example.com,http://localhost:3000";
    const own = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/ingress.yaml",
      "--set-string",
      `gateway.corsAllowedOrigins=${origins.replace(",", "\\,")}`,
    ]);
    const gateway = named(own, "ConfigMap", "rowbase-gateway")!.data;
    expect(gateway.CORS_ALLOWED_ORIGINS).toBe(origins);
    const env = { ...OUTSIDE_SECRETS, ...gateway, IDENTITY_GRPC_URL: "http://identity:50051" };
    expect(gatewayEnv.parse(env).CORS_ALLOWED_ORIGINS).toEqual(origins.split(","));
    for (const m of ofKind(own, "ConfigMap")) {
      if (m.metadata.name !== "rowbase-gateway")
        expect(m.data?.CORS_ALLOWED_ORIGINS).toBeUndefined();
    }
  });

  it("lets ingress-nginx stream bodies to the gateway, within the gateway's own limits", () => {
    const bodyLimits = (manifests: Manifest[]) => {
      const gateway = named(manifests, "Deployment", "rowbase-gateway")!;
      const env = gatewayEnv.parse(
        environmentOf(manifests, gateway.spec.template.spec.containers[0]),
      );
      const annotations: Record<string, string> = ofKind(manifests, "Ingress")[0]!.metadata
        .annotations;
      const nginx = (name: string) => annotations[`nginx.ingress.kubernetes.io/${name}`];
      // The forms ingress-nginx's annotation validation accepts (parser.SizeRegex, ValidateInt).
      expect(nginx("proxy-body-size")).toMatch(/^\d+[bkmg]?$/i);
      expect(nginx("proxy-send-timeout")).toMatch(/^\d+$/);
      expect(nginx("proxy-read-timeout")).toMatch(/^\d+$/);
      return { env, nginx };
    };
    const { env, nginx } = bodyLimits(render("deploy/ci-values/ingress.yaml"));
    // The gateway's own upload ceiling, now set where the Ingress reads it; the idle timeout
    // under ingress-nginx's default client-body-timeout (60 s), so that the gateway is the one
    // that answers a stalled body, in its envelope.
    expect(env.FILE_UPLOAD_MAX_BYTES).toBe(1_000_000_000);
    expect(env.REQUEST_BODY_IDLE_TIMEOUT_MS).toBe(50_000);
    // Bodies stream to the gateway, which bounds slow senders itself: no upload is spooled
    // whole on the controller's disk first.
    expect(nginx("proxy-request-buffering")).toBe("off");
    // Every body the gateway takes passes the proxy: the largest upload and its multipart
    // framing (MULTIPART_FRAMING_BYTES, 64 KiB); a larger one gets the gateway's own 413.
    expect(Number(nginx("proxy-body-size"))).toBe(env.FILE_UPLOAD_MAX_BYTES + 64 * 1024);
    // The proxy waits for the gateway at least as long as the gateway waits for a client,
    // and never less than ingress-nginx's own 60 s; for its answer, also as long as the
    // gateway waits for a schema change (SCHEMA_CHANGE_TIMEOUT_SECONDS and 2 s), and 3 s more.
    expect(nginx("proxy-send-timeout")).toBe("60");
    expect(env.SCHEMA_CHANGE_TIMEOUT_SECONDS).toBe(600);
    expect(nginx("proxy-read-timeout")).toBe("605");
    const raised = bodyLimits(
      helmTemplate(chart, "rowbase", [
        "-f",
        "deploy/ci-values/ingress.yaml",
        "--set",
        "gateway.fileUploadMaxBytes=5000000000",
        "--set",
        "gateway.requestBodyIdleTimeoutSeconds=300",
      ]),
    );
    expect(raised.env.FILE_UPLOAD_MAX_BYTES).toBe(5_000_000_000);
    expect(raised.env.REQUEST_BODY_IDLE_TIMEOUT_MS).toBe(300_000);
    expect(raised.nginx("proxy-body-size")).toBe("5000065536");
    expect(raised.nginx("proxy-send-timeout")).toBe("300");
    expect(raised.nginx("proxy-read-timeout")).toBe("605");
    const shortened = bodyLimits(
      helmTemplate(chart, "rowbase", [
        "-f",
        "deploy/ci-values/ingress.yaml",
        "--set",
        "gateway.requestBodyIdleTimeoutSeconds=20",
      ]),
    );
    expect(shortened.env.REQUEST_BODY_IDLE_TIMEOUT_MS).toBe(20_000);
    expect(shortened.nginx("proxy-send-timeout")).toBe("60");
    const quickChanges = bodyLimits(
      helmTemplate(chart, "rowbase", [
        "-f",
        "deploy/ci-values/ingress.yaml",
        "--set",
        "config.schemaChangeTimeoutSeconds=30",
        "--set",
        "gateway.requestBodyIdleTimeoutSeconds=120",
      ]),
    );
    expect(quickChanges.env.SCHEMA_CHANGE_TIMEOUT_SECONDS).toBe(30);
    expect(quickChanges.nginx("proxy-read-timeout")).toBe("120");
    // One place for each limit: neither the gateway's variables nor the derived annotations
    // may be set beside the values they come from.
    const run = (...args: string[]) =>
      spawnSync(
        helm,
        ["template", "rowbase", chart, "-f", "deploy/ci-values/ingress.yaml", ...args],
        { cwd: root, encoding: "utf8" },
      );
    const viaEnv = run("--set", "gateway.env.FILE_UPLOAD_MAX_BYTES=5");
    const timeoutViaEnv = run("--set", "records.env.SCHEMA_CHANGE_TIMEOUT_SECONDS=5");
    expect(timeoutViaEnv.status).not.toBe(0);
    expect(timeoutViaEnv.stderr).toContain("set config.schemaChangeTimeoutSeconds instead");
    expect(viaEnv.status).not.toBe(0);
    expect(viaEnv.stderr).toContain("set gateway.fileUploadMaxBytes instead");
    const viaExtraEnv = run(
      "--set-json",
      'gateway.extraEnv=[{"name":"REQUEST_BODY_IDLE_TIMEOUT_MS","value":"5000"}]',
    );
    expect(viaExtraEnv.status).not.toBe(0);
    expect(viaExtraEnv.stderr).toContain("set gateway.requestBodyIdleTimeoutSeconds instead");
    const annotated = run(
      "--set-string",
      "ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/proxy-body-size=1m",
    );
    expect(annotated.status).not.toBe(0);
    expect(annotated.stderr).toContain(
      "ingress.annotations: the chart sets nginx.ingress.kubernetes.io/proxy-body-size",
    );
    // Annotations of other kinds stay the user's.
    const own = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/ingress.yaml",
      "--set-string",
      "ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt",
    ]);
    expect(ofKind(own, "Ingress")[0]!.metadata.annotations["cert-manager.io/cluster-issuer"]).toBe(
      "letsencrypt",
    );
  });

  it("mounts the files directory from a claim, kept on uninstall, recreated when ReadWriteOnce", () => {
    const filesPod = (manifests: Manifest[]) =>
      named(manifests, "Deployment", "rowbase-files")!.spec.template.spec;
    const filesVolume = (manifests: Manifest[]) =>
      filesPod(manifests).volumes.find((v: Manifest) => v.name === "files");

    // kind: a claim of the default StorageClass, ReadWriteOnce, one replica, Recreate.
    const kind = render("deploy/values-kind.yaml");
    const [claim] = ofKind(kind, "PersistentVolumeClaim");
    expect(claim!.metadata.name).toBe("rowbase-files");
    expect(claim!.metadata.annotations["helm.sh/resource-policy"]).toBe("keep");
    expect(claim!.spec).toMatchObject({ accessModes: ["ReadWriteOnce"] });
    expect(claim!.spec.resources.requests.storage).toBe("1Gi");
    expect(claim!.spec.storageClassName).toBeUndefined();
    expect(filesVolume(kind).persistentVolumeClaim).toEqual({ claimName: "rowbase-files" });
    expect(filesPod(kind).containers[0].volumeMounts).toContainEqual({
      name: "files",
      mountPath: "/var/lib/rowbase/files",
    });
    expect(named(kind, "ConfigMap", "rowbase-files")!.data.FILES_DIR).toBe(
      "/var/lib/rowbase/files",
    );
    const kindFiles = named(kind, "Deployment", "rowbase-files")!;
    expect(kindFiles.spec.replicas).toBe(1);
    expect(kindFiles.spec.strategy).toEqual({ type: "Recreate" });
    // The other processes keep their rolling updates.
    expect(named(kind, "Deployment", "rowbase-records")!.spec.strategy.type).toBe("RollingUpdate");
    // The volume's group is set once: without OnRootMismatch the kubelet would chown every
    // stored file on each start of the pod.
    expect(filesPod(kind).securityContext).toMatchObject({
      fsGroup: 1000,
      fsGroupChangePolicy: "OnRootMismatch",
    });
    expect(
      named(kind, "Deployment", "rowbase-records")!.spec.template.spec.securityContext
        .fsGroupChangePolicy,
    ).toBeUndefined();
    const ownPolicy = (...args: string[]) =>
      filesPod(helmTemplate(chart, "rowbase", ["-f", "deploy/values-kind.yaml", ...args]))
        .securityContext;
    expect(
      ownPolicy("--set", "files.podSecurityContext.fsGroupChangePolicy=Always").fsGroupChangePolicy,
    ).toBe("Always");
    const noGroup = ownPolicy("--set", "serviceDefaults.podSecurityContext.fsGroup=null");
    expect(noGroup.fsGroup).toBeUndefined();
    expect(noGroup.fsGroupChangePolicy).toBeUndefined();

    // A ReadWriteMany class: three replicas share the claim and roll.
    const shared = render("deploy/ci-values/shared-volume.yaml");
    const [sharedClaim] = ofKind(shared, "PersistentVolumeClaim");
    expect(sharedClaim!.spec).toMatchObject({
      accessModes: ["ReadWriteMany"],
      storageClassName: "nfs-client",
    });
    const sharedFiles = named(shared, "Deployment", "rowbase-files")!;
    expect(sharedFiles.spec.replicas).toBe(3);
    expect(sharedFiles.spec.strategy.type).toBe("RollingUpdate");

    // An existing claim: mounted, none created.
    const external = render("deploy/ci-values/external.yaml");
    expect(ofKind(external, "PersistentVolumeClaim")).toEqual([]);
    expect(filesVolume(external).persistentVolumeClaim).toEqual({
      claimName: "rowbase-files-efs",
    });

    // Development without a claim: an emptyDir with a size limit.
    const dev = render("deploy/ci-values/dev-services.yaml");
    expect(ofKind(dev, "PersistentVolumeClaim")).toEqual([]);
    expect(filesVolume(dev).emptyDir).toEqual({ sizeLimit: "1Gi" });
  });

  it("puts files on S3 with the credentials from the chart's Secret or from the user's", () => {
    const s3 = render("deploy/ci-values/s3.yaml");
    const pod = named(s3, "Deployment", "rowbase-files")!.spec.template.spec;
    expect(ofKind(s3, "PersistentVolumeClaim")).toEqual([]);
    expect(pod.volumes.map((v: Manifest) => v.name)).toEqual(["tmp"]);
    const env = environmentOf(s3, pod.containers[0]);
    expect(env).toMatchObject({
      S3_ENDPOINT: "http://minio.storage.svc.cluster.local:9000",
      S3_BUCKET: "rowbase-files",
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: "rowbase",
      S3_SECRET_ACCESS_KEY: "change-me-change-me",
      FILE_URL_TTL_SECONDS: "900",
    });
    expect(env.FILES_DIR).toBeUndefined();
    expect(env.FILE_URL_SECRET).toMatch(/^[A-Za-z0-9]{48}$/);
    // Only files is given the credentials; files on S3 may run several replicas.
    for (const deployment of ofKind(s3, "Deployment")) {
      const names = (deployment.spec.template.spec.containers[0].env ?? []).map(
        (e: Manifest) => e.name,
      );
      expect(names.includes("S3_SECRET_ACCESS_KEY")).toBe(componentOf(deployment) === "files");
    }
    expect(named(s3, "HorizontalPodAutoscaler", "rowbase-files")!.spec.maxReplicas).toBe(8);

    const outside = render("deploy/ci-values/existing-secrets.yaml");
    const refs = Object.fromEntries(
      named(outside, "Deployment", "rowbase-files")!.spec.template.spec.containers[0].env.map(
        (e: Manifest) => [e.name, e.valueFrom?.secretKeyRef],
      ),
    );
    expect(refs.S3_ACCESS_KEY_ID).toEqual({ name: "rowbase-s3", key: "access-key-id" });
    expect(refs.S3_SECRET_ACCESS_KEY).toEqual({ name: "rowbase-s3", key: "secret-access-key" });
    expect(refs.FILE_URL_SECRET).toEqual({ name: "rowbase-app-secrets", key: "FILE_URL_SECRET" });
  });

  it("refuses files storage or OpenID sign-in that cannot work, naming what to set", () => {
    const fails = (...args: string[]) => {
      const result = spawnSync(
        helm,
        ["template", "rowbase", chart, "-f", "deploy/values-kind.yaml", ...args],
        { cwd: root, encoding: "utf8" },
      );
      expect(result.status).not.toBe(0);
      return result.stderr;
    };
    // Several replicas on one ReadWriteOnce claim, or each on its own emptyDir.
    expect(fails("--set", "files.replicaCount=2")).toContain("ReadWriteMany");
    expect(
      fails(
        "--set",
        "files.storage.directory.persistence.enabled=false",
        "--set",
        "files.autoscaling.enabled=true",
      ),
    ).toContain("several files replicas share one directory only on a ReadWriteMany volume");
    const s3 = fails("--set", "files.storage.type=s3");
    expect(s3).toContain("files.storage.s3.endpoint");
    expect(s3).toContain("files.storage.s3.bucket");
    expect(s3).toContain("files.storage.s3.existingSecret");
    // The gateway cannot start without records and files.
    expect(fails("--set", "files.enabled=false")).toContain("files.enabled: gateway needs it");
    expect(fails("--set", "records.enabled=false")).toContain("records.enabled: files needs it");
    // OpenID sign-in is all four settings or none (identity refuses to start otherwise).
    const oidc = fails("--set", "identity.oidc.issuer=https://login.example.com");
    expect(oidc).toContain("identity.oidc.clientId");
    expect(oidc).toContain("identity.oidc.redirectUri");
    expect(oidc).not.toContain("identity.oidc.issuer,");
    expect(
      fails("--set", "identity.oidc.allowedRedirectUris=https://app.example.com/cb"),
    ).toContain("identity.oidc.allowedRedirectUris needs");
  });

  it("refuses an Ingress whose clients would all share the controller's rate limits", () => {
    const run = (...args: string[]) =>
      spawnSync(
        helm,
        ["template", "rowbase", chart, "-f", "deploy/ci-values/ingress.yaml", ...args],
        {
          cwd: root,
          encoding: "utf8",
        },
      );
    // Behind an Ingress every request comes from the controller's pods: without trusting them,
    // one client's ten logins a minute would lock every other client out.
    const untrusted = run("--set", "gateway.trustedProxies=");
    expect(untrusted.status).not.toBe(0);
    expect(untrusted.stderr).toContain("gateway.trustedProxies");
    // The check is the gateway's, whichever services run beside it.
    const withoutFiles = run("--set", "gateway.trustedProxies=", "--set", "files.enabled=false");
    expect(withoutFiles.status).not.toBe(0);
    expect(withoutFiles.stderr).toContain("gateway.trustedProxies");
    expect(run("--set", "gateway.trustedProxies=", "--set", "gateway.rateLimits=off").status).toBe(
      0,
    );
    expect(run().status).toBe(0);
  });

  it("keeps the client's address as the peer of a gateway Service reachable from outside", () => {
    const policy = (...args: string[]) =>
      named(
        helmTemplate(chart, "rowbase", ["-f", "deploy/ci-values/ingress.yaml", ...args]),
        "Service",
        "rowbase-gateway",
      )!.spec.externalTrafficPolicy;
    // kube-proxy's SNAT under Cluster would make a node the peer: every client behind it
    // would share one key of the per-IP rate limits.
    expect(
      named(render("deploy/ci-values/observability.yaml"), "Service", "rowbase-gateway")!.spec,
    ).toMatchObject({ type: "LoadBalancer", externalTrafficPolicy: "Local" });
    expect(policy("--set", "gateway.service.type=NodePort")).toBe("Local");
    expect(
      policy(
        "--set",
        "gateway.service.type=LoadBalancer",
        "--set",
        "gateway.service.externalTrafficPolicy=Cluster",
      ),
    ).toBe("Cluster");
    // A ClusterIP Service has no external traffic (Kubernetes rejects the field there).
    expect(policy()).toBeUndefined();
  });

  it("sizes each service's PostgreSQL pool and refuses pools that exceed max_connections", () => {
    const run = (...args: string[]) =>
      spawnSync(
        helm,
        ["template", "rowbase", chart, "-f", "deploy/ci-values/ingress.yaml", ...args],
        { cwd: root, encoding: "utf8" },
      );
    // Each service reads its pool size from its environment; the gateway has no database.
    const s3 = render("deploy/ci-values/s3.yaml");
    for (const process of PROCESSES) {
      const deployment = named(s3, "Deployment", `rowbase-${process}`)!;
      const env = environmentOf(s3, deployment.spec.template.spec.containers[0]);
      const parsed = envSchemaOf(process).parse(env) as { DATABASE_POOL_MAX?: number };
      const expected =
        process === "gateway" ? undefined : process === "files" || process === "webhooks" ? 4 : 8;
      expect(parsed.DATABASE_POOL_MAX, process).toBe(expected);
    }
    // Five services of one replica with pools of 8 and webhooks with 4 hold 44, and during a
    // rolling update each but files (ReadWriteOnce, recreated) starts a surge pod beside its
    // replica: 80, which fits PostgreSQL's default 100 less 10 kept.
    expect(run().status).toBe(0);
    const surging = run("--set", "postgresql.maxConnections=81");
    expect(surging.status).not.toBe(0);
    expect(surging.stderr).toContain(
      "may open 80 PostgreSQL connections during a rolling update, 44 of the running pods and 36 of the surge pods",
    );
    expect(surging.stderr).toContain("identity (1+1) x 8");
    expect(surging.stderr).toContain("files 1 x 8, webhooks (1+1) x 4)");
    expect(surging.stderr).toContain("more than the 71 of postgresql.maxConnections (81)");
    // (files stays at one replica: its ReadWriteOnce volume allows no more)
    const tripled = ["--set", "serviceDefaults.replicaCount=3", "--set", "files.replicaCount=1"];
    const crowded = run(...tripled);
    expect(crowded.status).not.toBe(0);
    expect(crowded.stderr).toContain("postgresql.maxConnections");
    // A quarter of three replicas, rounded up as Kubernetes does: one surge pod each.
    expect(crowded.stderr).toContain("may open 152 PostgreSQL connections");
    expect(crowded.stderr).toContain("records (3+1) x 8");
    expect(run(...tripled, "--set", "postgresql.maxConnections=162").status).toBe(0);
    // Autoscaling counts its most replicas and their surge; smaller pools make room for them.
    const scaled = run("--set", "records.autoscaling.enabled=true");
    expect(scaled.status).not.toBe(0);
    expect(scaled.stderr).toContain("records (6+2) x 8");
    expect(
      run("--set", "records.autoscaling.enabled=true", "--set", "records.databasePoolMax=3").status,
    ).toBe(0);
    // The gateway holds no PostgreSQL connection, however far it scales.
    expect(
      run(
        "--set",
        "gateway.autoscaling.enabled=true",
        "--set",
        "gateway.autoscaling.maxReplicas=50",
      ).status,
    ).toBe(0);
  });

  it("refuses a pool size set through env or extraEnv, which the connection check would not see", () => {
    const run = (...args: string[]) =>
      spawnSync(
        helm,
        ["template", "rowbase", chart, "-f", "deploy/ci-values/ingress.yaml", ...args],
        { cwd: root, encoding: "utf8" },
      );
    // env is merged over the ConfigMap the chart fills, and extraEnv wins over the ConfigMap:
    // either would give records pools of 50 while the budget counted 8.
    const viaEnv = run("--set", "records.env.DATABASE_POOL_MAX=50");
    expect(viaEnv.status).not.toBe(0);
    expect(viaEnv.stderr).toContain(
      "records: DATABASE_POOL_MAX in env or extraEnv (its own or serviceDefaults') would override records.databasePoolMax",
    );
    const viaExtraEnv = run(
      "--set-json",
      'serviceDefaults.extraEnv=[{"name":"DATABASE_POOL_MAX","value":"50"}]',
    );
    expect(viaExtraEnv.status).not.toBe(0);
    for (const service of ["identity", "organization", "catalog", "records", "files"]) {
      expect(viaExtraEnv.stderr).toContain(`set ${service}.databasePoolMax instead`);
    }
    // The gateway has no pool: the variable means nothing there, and the chart does not set it.
    expect(viaExtraEnv.stderr).not.toContain("gateway.databasePoolMax");
    expect(run("--set", "gateway.env.DATABASE_POOL_MAX=50").status).toBe(0);
    // The value itself is what the chart counts and hands to the pods.
    const own = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/ingress.yaml",
      "--set",
      "records.databasePoolMax=3",
    ]);
    expect(named(own, "ConfigMap", "rowbase-records")!.data.DATABASE_POOL_MAX).toBe("3");
  });

  it("gives each migration step the extra environment of its service", () => {
    const password = { secretKeyRef: { name: "rowbase-db-password", key: "password" } };
    const manifests = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/ingress.yaml",
      "--set-json",
      `serviceDefaults.extraEnv=[{"name":"PGPASSWORD","valueFrom":${JSON.stringify(password)}}]`,
      "--set-json",
      'records.extraEnv=[{"name":"PGSSLMODE","value":"require"}]',
    ]);
    const steps = containersOf(ofKind(manifests, "Job")[0]!.spec.template.spec);
    const extra = (name: string) =>
      steps
        .find((step) => step.name === `migrate-${name}`)!
        .env.filter((e: Manifest) => e.name.startsWith("PG"));
    // `migrate` connects as the service does: a password or TLS mode given beside the URL counts.
    expect(extra("identity")).toEqual([{ name: "PGPASSWORD", valueFrom: password }]);
    expect(extra("records")).toEqual([{ name: "PGSSLMODE", value: "require" }]);
    const records = named(manifests, "Deployment", "rowbase-records")!;
    expect(records.spec.template.spec.containers[0].env).toContainEqual({
      name: "PGSSLMODE",
      value: "require",
    });
  });

  it("starts each process from a real entry point of the repository", () => {
    for (const deployment of ofKind(render("deploy/ci-values/external.yaml"), "Deployment")) {
      const main: string = deployment.spec.template.spec.containers[0].args[0];
      const source = main.replace("/dist/src/", "/src/").replace(/\.js$/, ".ts");
      expect(existsSync(path.join(root, source)), source).toBe(true);
    }
  });

  it("generates a valid Ed25519 signing JWK, and uses given secrets as they are", () => {
    for (let i = 0; i < 5; i++) {
      const [secret] = helmTemplate(chart, "rowbase", [
        "-f",
        "deploy/ci-values/external.yaml",
        "--show-only",
        "templates/secret.yaml",
      ]);
      const keys = JSON.parse(decode(secret!.data.JWT_SIGNING_KEYS));
      expect(keys).toHaveLength(1);
      const [jwk] = keys;
      expect(jwk).toMatchObject({ kty: "OKP", crv: "Ed25519" });
      expect(jwk.kid).toMatch(/^[0-9a-f]{16}$/);
      const privateKey = createPrivateKey({ key: jwk, format: "jwk" });
      // x must be the public half of d: derive it from d alone and compare.
      const derived = createPublicKey(privateKey).export({ format: "jwk" });
      expect(derived.x).toBe(jwk.x);
      const publicKey = createPublicKey({
        key: { kty: "OKP", crv: "Ed25519", x: jwk.x },
        format: "jwk",
      });
      const signature = sign(null, Buffer.from("rowbase"), privateKey);
      expect(verify(null, Buffer.from("rowbase"), publicKey, signature)).toBe(true);
      expect(decode(secret!.data.INTERNAL_JWT_SECRET)).toMatch(/^[A-Za-z0-9]{48}$/);
      expect(decode(secret!.data.FILE_URL_SECRET)).toMatch(/^[A-Za-z0-9]{48}$/);
    }

    const { privateKey } = generateKeyPairSync("ed25519");
    const given = JSON.stringify([{ ...privateKey.export({ format: "jwk" }), kid: "given" }]);
    const dir = mkdtempSync(path.join(tmpdir(), "rowbase-chart-"));
    const file = path.join(dir, "secrets.yaml");
    writeFileSync(
      file,
      stringify({
        secrets: { jwtSigningKeys: given, internalJwtSecret: "0123456789abcdef0123456789abcdef" },
      }),
    );
    const [secret] = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/external.yaml",
      "-f",
      file,
      "--show-only",
      "templates/secret.yaml",
    ]);
    rmSync(dir, { recursive: true });
    expect(decode(secret!.data.JWT_SIGNING_KEYS)).toBe(given);
    expect(decode(secret!.data.INTERNAL_JWT_SECRET)).toBe("0123456789abcdef0123456789abcdef");

    const bad = spawnSync(
      helm,
      [
        "template",
        "rowbase",
        chart,
        "-f",
        "deploy/ci-values/external.yaml",
        "--set-string",
        "secrets.jwtSigningKeys=[1]",
      ],
      { cwd: root, encoding: "utf8" },
    );
    expect(bad.stderr).toContain("secrets.jwtSigningKeys: a JSON array of Ed25519 private JWKs");
  });

  it("gives the services the previous internal secret only while one is given", () => {
    const previous = "the-previous-internal-secret-of-32-chars";
    const previousOf = (manifests: Manifest[], process: string) => {
      const deployment = named(manifests, "Deployment", `rowbase-${process}`)!;
      const env = environmentOf(manifests, deployment.spec.template.spec.containers[0]);
      return (envSchemaOf(process).parse(env) as { INTERNAL_JWT_SECRET_PREVIOUS?: string })
        .INTERNAL_JWT_SECRET_PREVIOUS;
    };
    const rotating = helmTemplate(chart, "rowbase", [
      "-f",
      "deploy/ci-values/external.yaml",
      "--set",
      `secrets.internalJwtSecretPrevious=${previous}`,
    ]);
    const secret = named(rotating, "Secret", "rowbase-secrets")!;
    expect(decode(secret.data.INTERNAL_JWT_SECRET_PREVIOUS)).toBe(previous);
    for (const process of PROCESSES) {
      // The services verify principals; the gateway only signs them, with the current secret.
      expect(previousOf(rotating, process), process).toBe(
        process === "gateway" ? undefined : previous,
      );
    }
    const settled = render("deploy/ci-values/external.yaml");
    expect(named(settled, "Secret", "rowbase-secrets")!.data.INTERNAL_JWT_SECRET_PREVIOUS).toBe(
      undefined,
    );
    for (const process of PROCESSES) expect(previousOf(settled, process), process).toBeUndefined();

    // In a Secret of the user's, the key is there only while rotating: an optional reference.
    const outside = render("deploy/ci-values/existing-secrets.yaml");
    const records = named(outside, "Deployment", "rowbase-records")!;
    expect(records.spec.template.spec.containers[0].env).toContainEqual({
      name: "INTERNAL_JWT_SECRET_PREVIOUS",
      valueFrom: {
        secretKeyRef: {
          name: "rowbase-app-secrets",
          key: "INTERNAL_JWT_SECRET_PREVIOUS",
          optional: true,
        },
      },
    });

    const refused = (file: string, value: string) =>
      spawnSync(
        helm,
        [
          "template",
          "rowbase",
          chart,
          "-f",
          file,
          "--set",
          `secrets.internalJwtSecretPrevious=${value}`,
        ],
        { cwd: root, encoding: "utf8" },
      );
    const short = refused("deploy/ci-values/external.yaml", "too-short");
    expect(short.status).not.toBe(0);
    expect(short.stderr).toContain("internalJwtSecretPrevious");
    const ignored = refused("deploy/ci-values/existing-secrets.yaml", previous);
    expect(ignored.status).not.toBe(0);
    expect(ignored.stderr).toContain("put INTERNAL_JWT_SECRET_PREVIOUS in that Secret instead");
  });

  it("puts its Secret back on rollback, so that pods read the URLs of the release rolled back to", () => {
    const manifests = render("deploy/ci-values/external.yaml");
    const secret = named(manifests, "Secret", "rowbase-secrets")!;
    // A hook is not a release resource: rollback leaves it alone unless it is a pre-rollback
    // hook too, and pods restarted by the rollback would read a failed upgrade's DATABASE_URL.
    expect(hookOf(secret)).toEqual(
      expect.arrayContaining(["pre-install", "pre-upgrade", "pre-rollback"]),
    );
    // There are no down migrations: a rollback runs none.
    expect(hookOf(ofKind(manifests, "Job")[0]!)).not.toContain("pre-rollback");
  });

  it("renders no Secret of its own when every secret comes from outside", () => {
    const manifests = render("deploy/ci-values/existing-secrets.yaml");
    expect(ofKind(manifests, "Secret")).toEqual([]);
  });

  it("renders the dev-services chart for kind as valid objects with the URLs the chart reads", () => {
    const manifests = helmTemplate(path.join(root, "deploy/dev-services"), "rowbase-deps", []);
    for (const manifest of manifests) {
      const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`];
      expect(Model, `no model for ${manifest.apiVersion} ${manifest.kind}`).toBeDefined();
      expect(() => new Model!(manifest as never).validate()).not.toThrow();
    }
    const kind = parse(readFileSync(path.join(root, "deploy/values-kind.yaml"), "utf8"));
    const secret = named(manifests, "Secret", kind.database.existingSecret);
    expect(Object.keys(secret!.stringData)).toEqual(
      expect.arrayContaining(["DATABASE_URL", "REDIS_URL", "NATS_URL"]),
    );
    for (const url of ["REDIS_URL", "NATS_URL"]) {
      expect(named(manifests, "Service", new URL(secret!.stringData[url]).hostname)).toBeDefined();
    }
    expect(
      named(manifests, "Service", new URL(secret!.stringData.DATABASE_URL).hostname),
    ).toBeDefined();
  });
});

describe("the chart's generated Secret", () => {
  const source = readFileSync(path.join(chart, "templates/secret.yaml"), "utf8");

  it("reads the Secret already in the cluster with lookup, so upgrades keep generated values", () => {
    expect(source).toMatch(
      /\$existing := \(lookup "v1" "Secret" \.Release\.Namespace \$name\)\.data/,
    );
    for (const key of ["INTERNAL_JWT_SECRET", "FILE_URL_SECRET", "JWT_SIGNING_KEYS"]) {
      // given value, else the one in the cluster, else a new one - in that order
      const line = source.split("\n").find((l) => l.includes(`get $existing "${key}"`));
      expect(line, `${key} is read back from the existing Secret`).toBeDefined();
      expect(line!.indexOf("$v.secrets.")).toBeLessThan(line!.indexOf("$existing"));
    }
    expect(source).toContain("(randAlphaNum 48)) }}");
    expect(source).toContain('include "rowbase.newSigningKeys"');
  });
});

/** values.yaml with a setup's file over it, merged as Helm does (maps merge, the rest replaces). */
function mergedValues(setup: string): Manifest {
  const base = parse(readFileSync(path.join(chart, "values.yaml"), "utf8"));
  const overlay = parse(readFileSync(path.join(root, setup), "utf8"));
  const merge = (a: Manifest, b: Manifest): Manifest => {
    const out: Manifest = { ...a };
    for (const [key, value] of Object.entries(b)) {
      const isMap = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);
      out[key] = isMap(value) && isMap(a[key]) ? merge(a[key], value) : value;
    }
    return out;
  };
  return merge(base, overlay);
}

describe("values", () => {
  const schema = JSON.parse(readFileSync(path.join(chart, "values.schema.json"), "utf8"));
  const validate = new Ajv({ allErrors: true, allowUnionTypes: true }).compile(schema);
  const valuesText = readFileSync(path.join(chart, "values.yaml"), "utf8");

  it("uses draft-07", () => {
    expect(schema.$schema).toBe("http://json-schema.org/draft-07/schema#");
  });

  it.each(["helm/rowbase/values.yaml", ...SETUPS])("%s matches values.schema.json", (file) => {
    const values = file === "helm/rowbase/values.yaml" ? parse(valuesText) : mergedValues(file);
    expect(validate(values), JSON.stringify(validate.errors, null, 2)).toBe(true);
  });

  it("rejects unknown keys and malformed URLs", () => {
    const values = parse(valuesText);
    expect(validate({ ...values, gatway: {} })).toBe(false);
    expect(validate({ ...values, database: { ...values.database, url: "mysql://x" } })).toBe(false);
    expect(validate({ ...values, records: { ...values.records, replicas: 2 } })).toBe(false);
    const storage = values.files.storage;
    expect(
      validate({ ...values, files: { ...values.files, storage: { ...storage, type: "gcs" } } }),
    ).toBe(false);
    expect(
      validate({
        ...values,
        files: { ...values.files, storage: { ...storage, s3: { ...storage.s3, endpoint: "s3" } } },
      }),
    ).toBe(false);
    expect(
      validate({ ...values, secrets: { ...values.secrets, internalJwtSecret: "short" } }),
    ).toBe(false);
  });

  it("documents every value with a `## @param` line", () => {
    const params = [...valuesText.matchAll(/^\s*## @param (\S+)/gm)].map((m) => m[1]!);
    const leaves: string[] = [];
    const walk = (value: unknown, at: string) => {
      if (typeof value === "object" && value !== null && !Array.isArray(value)) {
        const entries = Object.entries(value);
        if (entries.length === 0) leaves.push(at);
        for (const [key, child] of entries) walk(child, at ? `${at}.${key}` : key);
      } else {
        leaves.push(at);
      }
    };
    walk(parse(valuesText), "");
    for (const leaf of leaves) {
      const documented = params.some((p) => leaf === p || leaf.startsWith(`${p}.`));
      expect(documented, `${leaf} has no ## @param line`).toBe(true);
    }
    for (const param of params) {
      expect(
        leaves.some((leaf) => leaf === param || leaf.startsWith(`${param}.`)),
        `## @param ${param} names no value`,
      ).toBe(true);
    }
  });
});

describe("skaffold, kind and the image", () => {
  const skaffold = parse(readFileSync(path.join(root, "skaffold.yaml"), "utf8"));

  it("points skaffold at files that exist and at names the charts produce", () => {
    expect(skaffold.apiVersion).toMatch(/^skaffold\/v4beta\d+$/);
    const [artifact] = skaffold.build.artifacts;
    expect(existsSync(path.join(root, artifact.docker.dockerfile))).toBe(true);
    const [deps, app] = skaffold.deploy.helm.releases;
    expect(existsSync(path.join(root, deps.chartPath, "Chart.yaml"))).toBe(true);
    expect(existsSync(path.join(root, app.chartPath, "Chart.yaml"))).toBe(true);
    for (const file of app.valuesFiles) expect(existsSync(path.join(root, file))).toBe(true);
    expect(app.setValueTemplates["image.repository"]).toContain(`IMAGE_REPO_${artifact.image}`);

    const kindValues = parse(readFileSync(path.join(root, "deploy/values-kind.yaml"), "utf8"));
    expect(kindValues.database.existingSecret).toBe(`${deps.name}-connections`);
    // The release is named like the chart, so the gateway Service is "<release>-gateway".
    expect(app.name).toBe("rowbase");
    expect(skaffold.portForward[0].resourceName).toBe(`${app.name}-gateway`);
    expect(existsSync(path.join(root, "deploy/kind-config.yaml"))).toBe(true);
  });

  it("builds one non-root Node 24 image whose command picks the process", () => {
    const dockerfile = readFileSync(path.join(root, "deploy/Dockerfile"), "utf8");
    const stages = dockerfile.split(/^FROM /m).slice(1);
    const final = stages.at(-1)!;
    expect(dockerfile).toMatch(/node:24-bookworm-slim/);
    expect(final).toMatch(/^USER [1-9]\d*:[1-9]\d*$/m);
    expect(final).toMatch(/^ENTRYPOINT \["node"\]$/m);
    expect(final).not.toMatch(/npm ci(?! --omit=dev)/);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/npx tsc -b/);
    // A service's repeatable SQL files are read beside its package.json when it migrates.
    expect(dockerfile).toMatch(/cp -R "\$ws\/sql" "\/out\/\$ws\/"/);

    const ignored = readFileSync(path.join(root, ".dockerignore"), "utf8").split("\n");
    expect(ignored).toEqual(
      expect.arrayContaining(["**/node_modules", "**/dist", "**/*.tsbuildinfo", ".git"]),
    );
  });
});
