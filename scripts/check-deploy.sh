#!/usr/bin/env bash
# Checks the deployment files (docs/deploy.md), offline; scripts/test.sh (and so CI) runs it.
#
#   1. systemd: `systemd-analyze verify` on both units, installed into a throwaway root (the
#      host's own units for what they depend on, an empty stand-in for /usr/local/bin/pog):
#      any complaint fails, warnings too (an unknown or misspelt setting is only a warning to
#      systemd). Then `systemd-analyze security` scores each unit's exposure and fails if it
#      is worse than the score docs/deploy.md records (a loosened sandbox must update them).
#   2. Kubernetes: `kubectl kustomize` renders the base and every overlay; every overlay must
#      set the image (no container left on the bare name `pog`); `kubernetes-validate
#      --strict` checks every rendered object against the Kubernetes schemas of each version
#      in POG_K8S_VERSIONS (unknown fields fail), with no cluster.
#   Each checker is first shown a broken copy and must refuse it, so a checker that accepts
#   anything fails the check.
#
# kubernetes-validate comes from PyPI into .tools/deploy-venv (ignored by git), at the versions
# in deploy/check-requirements.txt, on first use. A missing tool (no systemd-analyze, no
# kubectl, no network for PyPI) skips that part with a message saying so; with
# POG_REQUIRE_DEPLOY_CHECK=1 it fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."

# Kubernetes versions whose schemas the manifests must meet: the oldest still widely run to
# the newest kubernetes-validate carries.
POG_K8S_VERSIONS=${POG_K8S_VERSIONS:-"1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37"}
# The exposure scores of `systemd-analyze security` (0 = tightest, 10 = none), in tenths, as
# docs/deploy.md records them (systemd 252).
declare -A MAX_EXPOSURE=([pog-agent]=15 [pog-validator]=11)
UNITS=(pog-agent pog-validator)

skipped=()
skip() {
    if [ "${POG_REQUIRE_DEPLOY_CHECK:-0}" != 0 ]; then
        echo "check-deploy: FAILED: $* (POG_REQUIRE_DEPLOY_CHECK is set)" >&2
        exit 1
    fi
    echo "check-deploy: SKIPPED: $*" >&2
    skipped+=("$1")
}
fail() {
    echo "check-deploy: FAILED: $*" >&2
    exit 1
}

work=$(mktemp -d /tmp/pog-check-deploy.XXXXXX)
trap 'rm -rf "$work"' EXIT

# ---- 1. systemd -----------------------------------------------------------------------
# verify ROOT UNIT...: prints what systemd-analyze says; fails on a non-zero exit or any
# output at all.
verify_units() {
    local root=$1; shift
    local said
    said=$(systemd-analyze verify --root="$root" "$@" 2>&1) && [ -z "$said" ] || {
        printf '%s\n' "$said"
        return 1
    }
}
if ! command -v systemd-analyze >/dev/null; then
    skip "systemd units: systemd-analyze not found (Debian's systemd package)"
else
    system_units=""
    for d in /usr/lib/systemd/system /lib/systemd/system; do
        [ -f "$d/multi-user.target" ] && { system_units=$d; break; }
    done
    [ -n "$system_units" ] || fail "systemd-analyze is here but the system's units are not"
    root="$work/root"
    mkdir -p "$root/usr/lib/systemd/system" "$root/etc/systemd/system" "$root/usr/local/bin"
    cp -a "$system_units/." "$root/usr/lib/systemd/system/"
    # verify checks that ExecStart= names an executable; the real binary is not needed.
    printf '#!/bin/sh\nexit 0\n' >"$root/usr/local/bin/pog"
    chmod 0755 "$root/usr/local/bin/pog"
    # The checker must refuse a misspelt setting before its silence means anything.
    sed 's/^ProtectSystem=strict$/ProtectSytem=strict/' deploy/systemd/pog-validator.service \
        >"$root/etc/systemd/system/pog-broken.service"
    if verify_units "$root" pog-broken.service >/dev/null; then
        fail "systemd-analyze verify accepted a unit with a misspelt setting: it checks nothing here"
    fi
    rm "$root/etc/systemd/system/pog-broken.service"
    for unit in "${UNITS[@]}"; do
        cp "deploy/systemd/$unit.service" "$root/etc/systemd/system/"
    done
    verify_units "$root" "${UNITS[@]/%/.service}" || fail "systemd-analyze verify: see above"
    for unit in "${UNITS[@]}"; do
        report=$(systemd-analyze security --root="$root" --offline=true --no-pager \
            --threshold="${MAX_EXPOSURE[$unit]}" "$unit.service" 2>&1) || {
            printf '%s\n' "$report" | grep '✗' >&2 || true
            printf '%s\n' "$report" | tail -1 >&2
            max=${MAX_EXPOSURE[$unit]}
            fail "$unit.service: exposure above $((max / 10)).$((max % 10)), the score docs/deploy.md records"
        }
        echo "check-deploy: $unit.service verified; $(printf '%s\n' "$report" | tail -1 | sed 's/^→ //')"
    done
fi

# ---- 2. Kubernetes ----------------------------------------------------------------------
kustomize_dirs=(deploy/kubernetes/base deploy/kubernetes/overlays/*/)
if ! command -v kubectl >/dev/null; then
    skip "Kubernetes manifests: kubectl not found (kubectl kustomize renders them)"
else
    rendered=()
    for dir in "${kustomize_dirs[@]}"; do
        dir=${dir%/}
        name=$(echo "$dir" | tr '/' '_')
        kubectl kustomize "$dir" >"$work/$name.yaml" || fail "kubectl kustomize $dir"
        if [[ $dir == */overlays/* ]]; then
            # Every overlay names a real image (its images: entry); the base leaves the name.
            if grep -nE '^ *image: *"?pog"?$' "$work/$name.yaml"; then
                fail "$dir leaves a container on the bare image name pog: set it under images:"
            fi
        fi
        rendered+=("$work/$name.yaml")
        echo "check-deploy: rendered $dir: $(grep -c '^kind:' "$work/$name.yaml") objects"
    done

    venv=.tools/deploy-venv
    if [ ! -x "$venv/bin/kubernetes-validate" ] ||
        ! cmp -s deploy/check-requirements.txt "$venv/check-requirements.txt"; then
        rm -rf "$venv"
        if python3 -m venv "$venv" &&
            "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
                --timeout 30 -r deploy/check-requirements.txt; then
            cp deploy/check-requirements.txt "$venv/check-requirements.txt"
        else
            rm -rf "$venv"
            skip "Kubernetes schemas: kubernetes-validate could not be installed from PyPI (no network?)"
        fi
    fi
    if [ -x "$venv/bin/kubernetes-validate" ]; then
        # The checker must refuse an unknown field first.
        sed 's/readOnlyRootFilesystem:/readOnlyRootFileSystem:/' "${rendered[0]}" >"$work/broken.yaml"
        if "$venv/bin/kubernetes-validate" --strict --quiet "$work/broken.yaml" >/dev/null 2>&1; then
            fail "kubernetes-validate accepted an unknown field: it checks nothing here"
        fi
        for version in $POG_K8S_VERSIONS; do
            for file in "${rendered[@]}"; do
                "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "$file" ||
                    fail "$(basename "$file" .yaml) does not meet the Kubernetes $version schemas"
            done
        done
        echo "check-deploy: every rendered object meets the schemas of Kubernetes $POG_K8S_VERSIONS (strict)"
    fi
fi

if [ ${#skipped[@]} -gt 0 ]; then
    echo "check-deploy: passed, but SKIPPED: ${skipped[*]}"
else
    echo "check-deploy: passed"
fi
