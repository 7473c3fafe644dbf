"""Claims tables: verdict rules, the files written, and the one-page summary."""
import pandas as pd
import pytest

from cdfgnn.errors import CdfgnnError
from cdfgnn.report.claims import Claim, claims_page, verdict_for, write_claims


def test_verdict_rules():
    assert verdict_for(3.1, 3.0, better="higher") == "reproduced"
    assert verdict_for(2.5, 3.0, better="higher", rel_tol=0.25) == "reproduced"
    assert verdict_for(1.0, 3.0, better="higher", rel_tol=0.25) == "not reproduced"
    assert verdict_for(0.9, 1.0, better="lower") == "reproduced"
    assert verdict_for(2.0, 1.0, better="lower", rel_tol=0.1) == "not reproduced"
    assert verdict_for(None, 1.0) == "not measured"
    assert verdict_for(float("nan"), 1.0) == "not measured"
    assert verdict_for(5.0, 1.0, setting_differs=True) == "different setting"
    with pytest.raises(ValueError):
        verdict_for(1.0, 1.0, better="sideways")


def test_claim_refuses_inconsistent_verdicts():
    with pytest.raises(CdfgnnError, match="verdict 'maybe'"):
        Claim("x", "1", 1.0, "cfg", "maybe")
    with pytest.raises(CdfgnnError, match="not measured"):
        Claim("x", "1", None, "cfg", "reproduced")


def test_write_claims_and_page(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    r1 = runs / "a.json"
    r1.write_text("{}")
    claims = [Claim("remote accesses -63%", "-63.14%", -51.2, "synth-reddit, 4 workers",
                    verdict_for(51.2, 63.14, rel_tol=0.25), runs=[str(r1)], unit="%"),
              Claim("faster than Sancus", "-30.39%", None, "n/a", "not measured")]
    out, md = tmp_path / "p_claims.csv", tmp_path / "p_claims.md"
    df = write_claims("PaperX", claims, out, md)
    assert list(df["verdict"]) == ["reproduced", "not measured"]
    back = pd.read_csv(out, keep_default_na=False)
    assert back.loc[0, "measured"] == "-51.2%" and back.loc[0, "runs"] == str(r1)
    text = md.read_text()
    assert "1 reproduced, 1 not measured" in text and str(r1) not in text
    page = tmp_path / "claims.md"
    claims_page([out], page)
    body = page.read_text()
    assert "## PaperX" in body and "(runs/a.json)" in body
    with pytest.raises(CdfgnnError, match="not a claims table"):
        bad = tmp_path / "bad.csv"
        bad.write_text("a,b\n1,2\n")
        claims_page([bad], page)


def test_claims_cli(tmp_path):
    from cdfgnn.cli import main

    out, md = tmp_path / "q_claims.csv", tmp_path / "q_claims.md"
    write_claims("PaperQ", [Claim("c", "2x", 1.9, "cfg", "reproduced")], out, md)
    page = tmp_path / "claims.md"
    assert main(["claims", "--tables", str(out), "--out", str(page)]) == 0
    assert "## PaperQ" in page.read_text()
    assert main(["claims", "--tables", str(tmp_path / "missing.csv"), "--out", str(page)]) == 2
