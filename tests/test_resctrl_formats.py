"""NodeSLO / slo-controller-config `resourceQOSStrategy.<class>.resctrlQOS` ⇄ the koordinator
policy's `resctrl_qos` (policies/formats/nodeslo.py): the field names and validation of
koordinator's apis/slo/v1alpha1 (ResctrlQOS: enable, catRangeStartPercent,
catRangeEndPercent, mbaPercent — percents in [0, 100]), DefaultResctrlQOS for what a document
leaves out, and no resctrl at all (koordlet's RdtResctrl gate off) when no class has it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from policies import resctrl_qos as rq
from policies.formats import nodeslo
from sim.errors import ScenarioError
from sim.scenario import policy_file

SPEC = {"resourceUsedThresholdWithBE": {"enable": True}}


def nodeslo_doc(qos: dict) -> dict:
    return {"apiVersion": nodeslo.API_VERSION, "kind": "NodeSLO", "metadata": {"name": "n"}, "spec": {**SPEC, "resourceQOSStrategy": qos}}


def read(tmp_path: Path, doc: dict) -> dict:
    path = tmp_path / "nodeslo.yaml"
    path.write_text(yaml.safe_dump(doc))
    return policy_file(path)["policy"]


def test_a_nodeslo_without_resctrlqos_leaves_the_gate_off(tmp_path):
    got = read(tmp_path, nodeslo_doc({"beClass": {"memoryQOS": {"enable": False}}}))
    assert "resctrl_qos" not in got


def test_resctrlqos_fields_and_defaults(tmp_path):
    got = read(tmp_path, nodeslo_doc({"beClass": {"resctrlQOS": {"enable": True, "catRangeEndPercent": 40, "mbaPercent": 55}}}))
    assert got["resctrl_qos"] == {"BE": {"enable": True, "cat_range_end_percent": 40, "mba_percent": 55}}
    from policies import build_policy

    p = build_policy({**got, "besteffort": "be"})
    assert p.resctrl_qos is not None
    # merged over DefaultResctrlQOS: BE starts at 0 %; LSR and LS keep 0–100 %, MBA 100 %
    assert p.resctrl_qos["BE"] == rq.ClassResctrl(True, 0, 40, 55)
    assert p.resctrl_qos["LS"] == rq.DEFAULTS["LS"] == rq.ClassResctrl(False, 0, 100, 100)


@pytest.mark.parametrize(
    ("qos", "where"),
    [
        (
            {"beClass": {"resctrlQOS": {"mbaPercent": 101}}},
            r"spec\.resourceQOSStrategy\.beClass\.resctrlQOS\.mbaPercent: must be in \[0, 100\]",
        ),
        ({"lsClass": {"resctrlQOS": {"enable": "yes"}}}, r"spec\.resourceQOSStrategy\.lsClass\.resctrlQOS\.enable: must be true or false"),
        ({"lsrClass": {"resctrlQOS": {"catRange": 3}}}, r"spec\.resourceQOSStrategy\.lsrClass\.resctrlQOS\.catRange: unknown field"),
    ],
)
def test_bad_fields_get_one_message_naming_them(tmp_path, qos, where):
    with pytest.raises(ScenarioError, match=where):
        read(tmp_path, nodeslo_doc(qos))


def test_a_koordinator_table_with_resctrl_qos_round_trips(tmp_path):
    """write_files (NodeSLO patch and ConfigMap) and back: the classes as the policy merged
    them (defaults included), nothing lost."""
    from policies import build_policy
    from policies.formats import write_files

    table = {
        "name": "koordinator",
        "besteffort": "be",
        "resctrl_qos": {"BE": {"enable": True, "cat_range_end_percent": 20, "mba_percent": 30}},
    }
    spec = nodeslo.write_spec(table)
    assert spec["resourceQOSStrategy"]["beClass"]["resctrlQOS"] == {
        "enable": True,
        "catRangeStartPercent": 0,
        "catRangeEndPercent": 20,
        "mbaPercent": 30,
    }
    want = build_policy(table).resctrl_qos
    for f in write_files(table, tmp_path):
        got = policy_file(f)["policy"]
        assert build_policy({**got, "besteffort": "be"}).resctrl_qos == want, f.name


def test_the_flat_be_percents_are_tunable_and_written(tmp_path):
    """resctrl_be_cat_range_end_percent / resctrl_be_mba_percent (what `colosim tune`
    searches): a value above 0 turns resctrl QoS on with BE enabled at it, and the written
    NodeSLO carries it in beClass.resctrlQOS; read back, the flat keys are 0 and the class
    has the values."""
    from policies import build_policy
    from policies.formats import write_files

    table = {"name": "koordinator", "besteffort": "be", "resctrl_be_cat_range_end_percent": 20, "resctrl_be_mba_percent": 40}
    p = build_policy(table)
    assert p.resctrl_qos is not None and p.resctrl_qos["BE"] == rq.ClassResctrl(True, 0, 20, 40)
    assert p.resctrl_qos["LS"] == rq.DEFAULTS["LS"]
    assert nodeslo.write_spec(table)["resourceQOSStrategy"]["beClass"]["resctrlQOS"]["catRangeEndPercent"] == 20
    for f in write_files(table, tmp_path):
        got = policy_file(f)["policy"]
        assert got["resctrl_be_cat_range_end_percent"] == 0 and got["resctrl_be_mba_percent"] == 0
        assert build_policy({**got, "besteffort": "be"}).resctrl_qos == p.resctrl_qos, f.name
    assert build_policy({"name": "koordinator", "besteffort": "be"}).resctrl_qos is None  # all 0: the gate stays off
    from policies.policy import PolicyError

    with pytest.raises(PolicyError, match="resctrl_be_cat_range_end_percent"):
        build_policy({**table, "resctrl_qos": {"BE": {"cat_range_start_percent": 25}}})  # 25 < 30, but not < 20
