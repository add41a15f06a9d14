"""Media RSS descriptions are captions of media, not the entry's text (real feeds'
shapes: Mastodon, Flickr, YouTube)."""

from __future__ import annotations

import pytest

from signal_feeds import parse_feed
from signal_feeds.parse.captions import set_captions_aside

MRSS = 'xmlns:media="http://search.yahoo.com/mrss/"'


def rss_item(inner: str, *, namespace: str = MRSS) -> bytes:
    return (f'<rss version="2.0" {namespace}><channel><title>c</title>'
            f"<item><guid>https://social.example/@ana/1</guid>{inner}</item>"
            "</channel></rss>").encode()


POST = "<description>&lt;p&gt;Hello &lt;b&gt;world&lt;/b&gt;&lt;/p&gt;</description>"
ALT = ('<media:content url="https://files.example/a.png" type="image/png" medium="image">'
       '<media:description type="plain">A cat &lt;asleep&gt;</media:description>'
       "</media:content>")
PHOTO = '<media:description type="html">&lt;p&gt;Shot at dawn&lt;/p&gt;</media:description>'


@pytest.mark.parametrize("inner", [
    POST + ALT,  # Mastodon: the picture's alt text after the post
    ALT + POST,  # the same, the other way round
    POST + PHOTO,  # Flickr: the photo's own caption, typed html
])
def test_a_caption_is_neither_the_summary_nor_the_content(inner: str) -> None:
    (entry,) = parse_feed(rss_item(inner)).entries
    assert entry.summary == "<p>Hello <b>world</b></p>"
    assert entry.content == ""


def test_any_prefix_bound_to_media_rss_is_recognized() -> None:
    other = ALT.replace("media:", "m:")
    (entry,) = parse_feed(rss_item(POST + other, namespace=MRSS.replace("media", "m"))).entries
    assert (entry.summary, entry.content) == ("<p>Hello <b>world</b></p>", "")


def test_a_caption_is_the_summary_of_an_entry_with_no_text_of_its_own() -> None:
    # YouTube: the video's description is plain text (Media RSS's default type), so
    # text in angle brackets is text, not markup to drop.
    atom = (f'<feed xmlns="http://www.w3.org/2005/Atom" {MRSS}><title>c</title>'
            "<entry><id>yt:video:1</id><title>v</title><media:group>"
            "<media:title>v</media:title><media:description>Use a &lt;b&gt; tag, "
            "1 &lt; 2</media:description></media:group></entry></feed>").encode()
    (entry,) = parse_feed(atom).entries
    assert entry.summary == "Use a &lt;b&gt; tag, 1 &lt; 2"
    (photo,) = parse_feed(rss_item(PHOTO)).entries  # typed html: sanitized HTML
    assert photo.summary == "<p>Shot at dawn</p>"


@pytest.mark.parametrize("empty", ["&lt;p&gt;&lt;/p&gt;",
                                   "&lt;p&gt; &lt;br&gt;&amp;nbsp;&lt;/p&gt;"])
def test_a_picture_posted_without_words_is_known_by_its_alt_text(empty: str) -> None:
    # Mastodon: a post of one picture has an empty paragraph for its text.
    (entry,) = parse_feed(rss_item(f"<description>{empty}</description>" + ALT)).entries
    assert entry.summary == "A cat &lt;asleep&gt;"
    # A post whose markup shows something keeps it.
    image = "&lt;p&gt;&lt;img src='https://files.example/b.png'&gt;&lt;/p&gt;"
    (shown,) = parse_feed(rss_item(f"<description>{image}</description>" + ALT)).entries
    assert "<img" in shown.summary


def test_renaming_keeps_the_document_well_formed() -> None:
    body = rss_item(POST + '<media:description type="html"/>' + ALT)
    renamed = set_captions_aside(body)
    assert b"media:description" not in renamed
    assert b"<media:signal_html_caption/>" in renamed
    assert b"</media:signal_caption>" in renamed
    assert not parse_feed(body).warnings  # no well-formedness complaint
    plain = rss_item(POST, namespace="")
    assert set_captions_aside(plain) is plain  # no Media RSS: untouched
