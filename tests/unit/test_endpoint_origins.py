"""Where endpoints answer and what crosses between an endpoint and a browser (issue 25)."""

from __future__ import annotations

import doctest

import pytest

from sluice.domain import endpoint_origins as o


def test_doctests() -> None:
    assert doctest.testmod(o).failed == 0


@pytest.mark.parametrize(
    "value",
    [
        "ftp://{id}.h.example.com/",
        "https://h.example.com/{id}/",  # {id} in the path
        "https://{id}.h.example.com/hooks/",  # a path after a templated host
        "https://{id}{id}.h.example.com/",
        "https://a.{id}.example.com/",  # not the first label
        "https://{id}/",  # a bare label: every single-label host would be an endpoint's
    ],
)
def test_a_template_that_cannot_route_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"http|id|path"):
        o.parse(value)


def test_hosts_of_the_template_route_to_their_endpoint() -> None:
    base = o.parse("https://ep-{id}.hooks.example.com/")
    assert o.url(base, "", "abc123") == "https://ep-abc123.hooks.example.com"
    assert o.endpoint_of_host(base, "EP-ABC123.hooks.example.com.:8443") == "abc123"
    for other in (
        "hooks.example.com",
        "ep-.hooks.example.com",
        "x.ep-a.hooks.example.com",
        "sluice.example.com",
        "[::1]:8000",
        "",
    ):
        assert o.endpoint_of_host(base, other) is None, other
    appended = o.parse("https://hooks.example.com/e")
    assert not appended.per_endpoint_hosts
    assert o.url(appended, "unused", "abc") == "https://hooks.example.com/e/abc"
    assert o.endpoint_of_host(appended, "abc.hooks.example.com") is None


def test_on_a_shared_origin_no_cookie_crosses() -> None:
    request = [("Cookie", "app_session=1"), ("cookie", "sluice_session=2"), ("x-a", "b")]
    assert o.request_headers(request, own_origin=False) == [("x-a", "b")]
    answer = [
        ("set-cookie", "app_session=evil; Path=/"),
        ("set-cookie", "=sluice_session=planted"),
        ("clear-site-data", '"cookies"'),
        ("set-cookie2", "a=1"),
        ("service-worker-allowed", "/"),
        ("content-type", "text/html"),
    ]
    assert o.answer_headers(answer, own_origin=False) == [("content-type", "text/html")]


def test_on_its_own_host_an_endpoint_keeps_its_own_cookies_only() -> None:
    request = [("cookie", "a=1; sluice_session=s; __Host-sluice_x=t")]
    assert o.request_headers(request, own_origin=True) == [("cookie", "a=1")]
    answer = [
        ("set-cookie", "app_session=1; Path=/; HttpOnly"),
        ("set-cookie", "wide=1; Path=/; domain=.example.com"),  # siblings and the UI's parent
        ("set-cookie", "=sluice_session=planted"),  # nameless
        ("set-cookie", "justavalue"),  # nameless too
        ("set-cookie", " SLUICE_SESSION=x"),
        ("set-cookie", "__Host-sluice_session=x; Secure; Path=/"),
        ("clear-site-data", '"cookies"'),  # the registrable domain's cookies: the UI's too
    ]
    assert o.answer_headers(answer, own_origin=True) == [
        ("set-cookie", "app_session=1; Path=/; HttpOnly"),
    ]
