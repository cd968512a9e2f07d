"""The spider's link follower: canonical forms, their cache and the URLs scheduled."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from w3lib.url import canonicalize_url

import spidersite.links
from spidersite.crawlsettings import CrawlSettings
from spidersite.links import LinkFollower


@pytest.fixture
def follower(tmp_path: Any) -> LinkFollower:
    settings = {"SPIDERSITE_DATA_DIR": str(tmp_path), "SITE_CANONICAL_CACHE": "4096"}
    config = CrawlSettings.from_settings(Settings(settings))
    return LinkFollower(get_crawler(settings_dict=settings), config, requests=None)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs the follower canonicalizes."""
    made: list[str] = []

    def counted(url: str) -> str:
        made.append(url)
        return canonicalize_url(url)

    monkeypatch.setattr(spidersite.links, "canonicalize_url", counted)
    return made


def test_canonical_form_cached(follower: LinkFollower, calls: list[str]) -> None:
    url = "http://a.example/p?b=2&a=1"
    assert follower.canonical(url) == "http://a.example/p?a=1&b=2"
    assert follower.canonical(url) == "http://a.example/p?a=1&b=2"
    assert calls == [url]


def test_a_scheduled_url_is_not_canonicalized_again(
    follower: LinkFollower, calls: list[str]
) -> None:
    """A link to a page already scheduled skips canonicalisation, even once the cache of
    canonical forms has started again."""
    scheduled = follower.canonical("http://a.example/x/../page?z=1&y=2")
    assert follower.first_time(scheduled)
    follower._canonical.clear()  # the cache full and started again
    calls.clear()
    assert follower.canonical(scheduled) == scheduled
    assert calls == []
    # another spelling of it is still canonicalized
    assert follower.canonical("http://A.example/page?y=2&z=1") == scheduled
    assert calls == ["http://A.example/page?y=2&z=1"]
    # a URL the crawl forgot is no longer known to be canonical
    follower.forget(scheduled)
    calls.clear()
    assert follower.canonical(scheduled) == scheduled
    assert calls == [scheduled]


def test_invalid_url_refused_even_when_unscheduled(follower: LinkFollower) -> None:
    with pytest.raises(ValueError, match="contains spaces"):
        follower.canonical("http://a.example/a b\u00a0c")


def test_cache_bounded_in_bytes(follower: LinkFollower) -> None:
    """SITE_CANONICAL_CACHE (4096 bytes here) bounds the cache; a URL already canonical
    costs one string, not two."""
    for n in range(200):
        follower.canonical(f"http://a.example/{n}.html")
    assert follower._canonical_bytes <= 4096
    assert 0 < len(follower._canonical) < 200
    url, canon = next(iter(follower._canonical.items()))
    assert url is canon


@pytest.mark.parametrize(
    ("url", "canon"),
    [
        ("http://127.0.0.1:80/p", "http://127.0.0.1/p"),
        ("HTTP://A.example:80/p?b=2&a=1", "http://a.example/p?a=1&b=2"),
        ("https://a.example:443/", "https://a.example/"),
        ("ftp://a.example:21/pub/", "ftp://a.example/pub/"),
        ("news://a.example:119/comp.lang", "news://a.example/comp.lang"),
        ("nntp://a.example:119/comp.lang", "nntp://a.example/comp.lang"),
        ("http://user:pw@a.example:80/", "http://user:pw@a.example/"),
        ("http://[::1]:80/p", "http://[::1]/p"),
        # Other ports are kept, and a default port of another scheme too.
        ("http://a.example:8080/p", "http://a.example:8080/p"),
        ("http://a.example:443/p", "http://a.example:443/p"),
        ("https://a.example:80/p", "https://a.example:80/p"),
    ],
)
def test_default_port_is_dropped(follower: LinkFollower, url: str, canon: str) -> None:
    """A URL that spells out its scheme's default port is the URL without it, as
    search.urls.origin() has it: one request, one robots.txt and one row per page."""
    assert follower.canonical(url) == canon
    assert follower.canonical(canon) == canon
