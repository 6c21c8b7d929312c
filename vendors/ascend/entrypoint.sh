#!/bin/bash
# Entrypoint of Ascend images: load CANN's environment (library paths, ASCEND_* variables),
# then run the command. Without it, `import torch_npu` cannot find CANN's libraries.
set -euo pipefail
if [ -f "${OOTA_ASCEND_SET_ENV:?OOTA_ASCEND_SET_ENV is not set}" ]; then
    # set_env.sh reads unset variables; relax -u while it runs.
    set +u
    # shellcheck disable=SC1090
    source "$OOTA_ASCEND_SET_ENV"
    set -u
else
    echo "oota: $OOTA_ASCEND_SET_ENV is missing: this base image has no CANN toolkit" >&2
fi
exec "$@"
