"""specsample.kernels._interpreter_request: TRITON_INTERPRET is set only while triton is not imported
(set later, `triton.jit` would interpret only the kernel modules decorated afterwards). Deterministic
checks, no alpha."""

import os
import subprocess
import sys

from specsample.kernels._interpreter_request import request_interpreter


def _env_after(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = f"import os\n{code}\nprint(os.environ.get('TRITON_INTERPRET', 'unset'))"
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def test_set_before_triton_is_imported():
    code = "from specsample.kernels._interpreter_request import request_interpreter\nrequest_interpreter()"
    assert _env_after(code) == "1"


def test_left_unset_once_triton_is_imported():
    code = "import triton\nfrom specsample.kernels._interpreter_request import request_interpreter\n"
    assert _env_after(code + "request_interpreter()") == "unset"


def test_a_value_the_caller_set_is_kept(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    request_interpreter()
    assert os.environ["TRITON_INTERPRET"] == "0"
