#!/usr/bin/env bash
# Installs everything the course needs on a fresh Debian/Ubuntu machine (or a conda env), idempotently:
#   - a Python 3.11 virtual environment in .venv: the course package (editable) and its dependencies,
#     pinned by constraints.txt (requirements.txt);
#   - a CJK font for Chinese in figures, Chromium for the slide and TA-screen checks, bubblewrap and libseccomp
#     for the grading sandbox (apt, when run as root);
#   - reveal.js, MathJax, require.js and jQuery from the npm registry, for offline slides and feedback.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n[setup] %s\n' "$*"; }

# --- system packages (optional when not root: the course still runs, figures may lack CJK glyphs) ---
need_apt=()
fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || need_apt+=(fonts-noto-cjk)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
ldconfig -p 2>/dev/null | grep -q "libseccomp.so.2" || need_apt+=(libseccomp2)  # the sandbox's seccomp filter
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || need_apt+=(postgresql)  # the PostgreSQL gradebook test
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    fc-cache -f >/dev/null 2>&1 || true
  else
    log "please install: ${need_apt[*]} (not root or no apt-get; continuing)"
  fi
fi

# --- Python environment ---
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PY=$candidate; break
    fi
  done
fi
[ -n "$PY" ] || { echo "[setup] Python 3.11 is required (d2l 1.0.3 pins numpy 1.23.5)" >&2; exit 1; }

stamp=.venv/.installed
want="$(cat requirements.txt constraints.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "Python packages into .venv (torch, d2l, nbgrader, JupyterLab + RISE; a few minutes the first time)"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  # pip's own errors stop the setup (set -e); its output is kept quiet only when it succeeds.
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt \
    || { echo "[setup] pip install failed (see above)" >&2; exit 1; }
  .venv/bin/python -c "import torch, torchvision, d2l.torch, nbgrader, attncourse" \
    || { echo "[setup] the Python environment is incomplete" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# --- RISE's defaults for this environment, the decks' own settings (attncourse.notebooks.RISE): the lecture hall
#     may have no network (the default theme asks Google Fonts before a deck's own settings apply), slides start at
#     the top, are numbered, and are laid out at 768×480 and scaled to the screen (1.6× at 1280×800) ---
.venv/bin/python - <<'PY'
import json, pathlib, sys
from attncourse.notebooks import RISE
path = pathlib.Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
settings = json.loads(path.read_text()) if path.exists() else {}
settings["jupyterlab-rise:plugin"] = RISE
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(settings, indent=1))
PY

# --- formgrader as the course uses it: Chinese, each list row's outcome, held submissions decided by a named
#     reviewer, math offline, no buttons around the course's checks, and JupyterLab's Nbgrader menu without the
#     exchange's lists and Create Assignment (src/attncourse/grading/publish/formgrader/) ---
#     (`jupyter server extension enable` refuses an extension no config file names yet: write the file)
.venv/bin/python - <<'PY'
import json, pathlib, sys
from attncourse.grading.publish.formgrader import hide_around_the_course
path = pathlib.Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "attncourse.json"
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps({"ServerApp": {"jpserver_extensions": {"attncourse.grading.publish.formgrader": True}}}))
hide_around_the_course()
PY

# --- git stores decks and sources clean, whatever a presenting session saved into them (.gitattributes) ---
if git rev-parse --git-dir >/dev/null 2>&1; then
  git config filter.course-notebook.clean '.venv/bin/course tidy --stdin %f'
  git config filter.course-notebook.smudge cat
fi

# --- offline slide assets from the npm registry ---
if [ ! -f build/vendor/node_modules/mathjax/MathJax.js ] || [ ! -d build/vendor/node_modules/reveal.js/dist ] \
   || [ ! -f build/vendor/node_modules/mathjax3/es5/tex-svg.js ]; then
  log "reveal.js, MathJax 2 (slides) and 3 (feedback), require.js, jQuery (npm) into build/vendor"
  mkdir -p build/vendor
  npm install --prefix build/vendor --no-audit --no-fund --silent \
    reveal.js@4.0.2 mathjax@2.7.7 mathjax3@npm:mathjax@3.2.2 requirejs@2.1.10 jquery@2.2.4
fi
log "ready"
