"""parity.VERDICTS is the C library's vocabulary, taken from the C side (parity_verdict_name in
enum order until it answers "?"), so it cannot fall behind the enum: it once stopped at 8 of 9
(no "stale-cache")."""
import os
import re

import parity
from parity._lib import lib

SRC = os.environ.get("PARITY_SRC") or os.path.join(os.path.dirname(__file__), "..", "..")


def _enum_members():
    with open(os.path.join(SRC, "include", "parity", "verdict.h")) as f:
        text = f.read()
    body = re.search(r"typedef enum \{(.*?)\} parity_verdict_t;", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return re.findall(r"\bPARITY_VERDICT_[A-Z_]+\b", body)


def test_verdicts_match_the_c_enum():
    members = _enum_members()
    assert len(parity.VERDICTS) == len(members) >= 9
    assert parity.VERDICTS[0] == "faithful" and parity.VERDICTS[1] == "unfaithful"
    assert "stale-cache" in parity.VERDICTS
    assert len(set(parity.VERDICTS)) == len(parity.VERDICTS) and "?" not in parity.VERDICTS
    # one past the last is the C side's "?", the end marker the list is built from
    assert lib.parity_py_verdict_name(len(members)).decode() == "?"


def test_verdict_names_are_the_clis():
    # the names the header's comment lists, the vocabulary of `parity check` and its JSON
    with open(os.path.join(SRC, "include", "parity", "verdict.h")) as f:
        text = f.read()
    for name in parity.VERDICTS:
        assert '"%s"' % name in text, name


def _members(header, enum_type, prefix):
    with open(os.path.join(SRC, "include", "parity", header)) as f:
        text = f.read()
    body = re.search(r"typedef enum \{(.*?)\} %s;" % enum_type, text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [(m.group(1), int(m.group(2))) for m in re.finditer(r"\b%s([A-Z0-9_]+)\s*=\s*(\d+)" % prefix, body)]


def test_dtypes_and_roles_come_from_the_c_enums():
    """Issue #35: every enum the package uses is read from the C side by count (dtype codes for
    outputs and baselines, roles of declared ops' inputs), never a literal table."""
    from parity import _lib
    dts = _members("kernel_abi.h", "parity_dtype_t", "PARITY_DT_")
    assert len(_lib.DTYPE_CODE) == len(dts) >= 9
    assert sorted(_lib.DTYPE_CODE.values()) == [v for _, v in sorted(dts, key=lambda t: t[1])]
    assert _lib.DTYPE_CODE["f32"] == dict(dts)["F32"] and _lib.DTYPE_CODE["bf16"] == dict(dts)["BF16"]
    roles = _members("op_abi.h", "parity_role_t", "PARITY_ROLE_")
    assert _lib.ROLES == [n.lower() for n, _ in sorted(roles, key=lambda t: t[1])]
    assert parity.Input(("N",), role=_lib.ROLES[-1]).role == _lib.ROLES[-1]
