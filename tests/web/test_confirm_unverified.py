"""The approve confirm for a round proposal its checker did not verify: the page's
`--unverified`, a second explicit yes that names what it skips."""

from __future__ import annotations

from looop_py.web import views


def _detail(verified: bool | None) -> dict[str, object]:
    hold = (
        {"round": "r1", "key": "fixit"}
        if verified is None
        else {"round": "r1", "verified": verified}
    )
    return {
        "ask": {"id": "a1", "prompt": "apply the patch?", "hold": hold},
        "state": "pending",
        "answer": None,
        "would_run": {"action": "round", "text": None, "file": None, "move": hold},
    }


def test_an_unverified_proposal_says_so_and_sends_the_second_yes() -> None:
    page = views.confirm(_detail(False), csrf="tok")
    assert 'id="unverified"' in page and "did NOT verify" in page
    assert '<input type="hidden" name="unverified" value="yes">' in page
    assert "unverified</button>" in page


def test_a_verified_proposal_has_no_second_yes() -> None:
    for verified in (True, None):
        page = views.confirm(_detail(verified), csrf="tok")
        assert "unverified" not in page
