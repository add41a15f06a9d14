"""Summaries and content as stored: sanitized HTML that shows what the publisher wrote."""

from __future__ import annotations

import subprocess
import sys

import pytest

from signal_feeds import parse_feed


def _summary(html: str) -> str:
    body = ('<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
            '<link>https://blog.example/</link><item><guid>g</guid>'
            '<link>https://blog.example/post</link>'
            f"<description><![CDATA[{html}]]></description></item></channel></rss>")
    feed = parse_feed(body.encode())
    assert feed.warnings == ()
    return feed.entries[0].summary


@pytest.mark.parametrize(("html", "stored"), [
    # What a page shows without scripts: it was stored as its markup, escaped.
    ('<div class="quiz-app"></div><noscript><p>Take the <a href="/quiz">quiz</a>.</p>'
     "</noscript>",
     '<div></div><p>Take the <a href="https://blog.example/quiz" rel="noopener noreferrer">'
     "quiz</a>.</p>"),
    # Any case, with attributes.
    ('<NoScript class="fallback"><b>bold</b></NOSCRIPT> text',
     "<b>bold</b> text"),
    # An embed's or a frame's fallback (the embed and the frame themselves are removed).
    ("<iframe src=\"https://video.example/1\"><p>No frames: <a href=\"/v\">watch</a></p>"
     "</iframe>", '<p>No frames: <a href="https://blog.example/v" rel="noopener noreferrer">'
     "watch</a></p>"),
    ("<noembed><i>a clip</i></noembed>", "<i>a clip</i>"),
    # An iframe written as XML: HTML has no empty iframe, so the rest of the article was
    # its content, stored as escaped text. (Without a fallback, a link takes its place.)
    ('<p>Watch:</p><iframe src="https://video.example/1" /><p>After <b>it</b></p>',
     '<p>Watch:</p><a href="https://video.example/1" rel="noopener noreferrer">'
     "https://video.example/1</a><p>After <b>it</b></p>"),
    # Scripts and styles still go, with what they hold.
    ("<noscript><script>alert(1)</script>ok</noscript><style>p{}</style>", "ok"),
    # A textarea shows its markup as text in a browser too: kept as it was.
    ("<textarea><b>t</b></textarea>", "&lt;b&gt;t&lt;/b&gt;"),
])
def test_a_fallback_for_readers_without_scripts_is_stored_as_html(html: str,
                                                                  stored: str) -> None:
    assert _summary(html) == stored


def test_a_fallback_cannot_smuggle_markup_past_the_sanitizer() -> None:
    # Taking the fallback's tags out can join what was apart; the sanitizer reads the
    # joined text and still removes what it must.
    stored = _summary('<scr<noscript>ipt>alert(1)</scr</noscript>ipt>'
                      '<img src=x on<noscript>error="alert(2)">')
    assert stored == '<img src="https://blog.example/x">'
    # A fallback tag inside an attribute's value changes only that value.
    assert (_summary('<noscript><p title="</noscript><img src=x onerror=alert(1)>"></p>')
            == '<p title="&lt;img src=x onerror=alert(1)&gt;"></p>')


def _title(escaped_html: str) -> str:
    body = ('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><entry><id>g</id>'
            f'<title type="html">{escaped_html}</title></entry></feed>')
    return parse_feed(body.encode()).entries[0].title


def test_a_title_given_as_html_keeps_its_fallback_text() -> None:
    assert _title("Hello &lt;noscript&gt;&lt;b&gt;world&lt;/b&gt;&lt;/noscript&gt;") == (
        "Hello world")


@pytest.mark.parametrize(("html", "stored"), [
    # WordPress's video and audio blocks were stored as nothing at all (an empty figure).
    ('<figure class="wp-block-video"><video autoplay loop src="/clip.mp4" poster="p.jpg" '
     'onplay="track()"></video></figure>',
     '<figure><video src="https://blog.example/clip.mp4" '
     'poster="https://blog.example/p.jpg" controls=""></video></figure>'),
    ('<AUDIO src="https://cdn.example/ep.mp3"></AUDIO>',
     '<audio src="https://cdn.example/ep.mp3" controls=""></audio>'),
    # Sources inside: their addresses are checked as an image's are.
    ('<video controls><source src="javascript:alert(1)" type="video/mp4">'
     '<source src="clip.webm" type="video/webm"><a href="clip.webm">download</a></video>',
     '<video controls=""><source type="video/mp4">'
     '<source src="https://blog.example/clip.webm" type="video/webm">'
     '<a href="https://blog.example/clip.webm" rel="noopener noreferrer">download</a>'
     "</video>"),
    # A picture keeps its sources inside it; srcset (addresses unchecked) is not kept.
    ('<picture><source srcset="big.webp" type="image/webp"><img src="big.jpg" alt="">'
     "</picture>",
     '<picture><source type="image/webp"><img src="https://blog.example/big.jpg" alt="">'
     "</picture>"),
])
def test_a_video_or_a_sound_is_kept_playable(html: str, stored: str) -> None:
    assert _summary(html) == stored


def test_media_elements_are_kept_only_in_summaries_and_content() -> None:
    # A title is text: a player in it leaves nothing behind.
    assert _title('Clip &lt;video src="/a.mp4"&gt;&lt;/video&gt;') == "Clip"


@pytest.mark.parametrize(("html", "stored"), [
    # The placeholder (a blank data: image) was removed, leaving an image without an
    # address; the script that would load the real one never runs on a stored copy.
    ('<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" data-src="/cat.jpg" '
     'alt="a > cat" class="lazyload">',
     '<img src="https://blog.example/cat.jpg" alt="a &gt; cat">'),
    ("<img data-lazy-src='https://cdn.example/b.jpg?w=1&amp;h=2' src=/spinner.svg "
     "width=10 />", '<img src="https://cdn.example/b.jpg?w=1&amp;h=2" width="10">'),
    ('<img data-original="c.png">', '<img src="https://blog.example/c.png">'),
    # Attribute names in any case (HTML's are case-insensitive).
    ('<IMG SRC="/spinner.gif" DATA-SRC="/d.jpg">', '<img src="https://blog.example/d.jpg">'),
    # The moved address is checked as any image's.
    ('<img data-src="javascript:alert(1)" src="ok.jpg" alt="j">', '<img alt="j">'),
    # An empty one moves nothing; an image without one is left as it was.
    ('<img data-src="" src="keep.jpg"><img src="real.jpg" data-id="7">',
     '<img src="https://blog.example/keep.jpg"><img src="https://blog.example/real.jpg">'),
    # With a <noscript> copy of each image beside it, each image once.
    ('<p><img src="data:image/gif;base64,R0lGOD==" data-src="/cat.jpg" alt="cat">'
     '<noscript><img src="/cat.jpg" alt="cat"></noscript></p>',
     '<p><img src="https://blog.example/cat.jpg" alt="cat"></p>'),
    # Only the copies go: a fallback with more than images in it was deleted whole,
    # its link and text with it, once any image of the post was lazily loaded.
    ('<img data-src="/a.jpg" src="data:,"><noscript><p>Listen: <a href="/ep1.mp3">'
     "episode 1</a></p></noscript><p>end</p>",
     '<img src="https://blog.example/a.jpg"><p>Listen: <a href="https://blog.example/'
     'ep1.mp3" rel="noopener noreferrer">episode 1</a></p><p>end</p>'),
])
def test_a_lazily_loaded_image_is_stored_with_its_address(html: str, stored: str) -> None:
    assert _summary(html) == stored


def test_a_formula_and_a_drawing_keep_their_text() -> None:
    # nh3 removes MathML and SVG whole: "Einsteins Gleichung  gilt", and neither the
    # formula nor the chart's labels could be searched.
    assert _summary(
        '<p>Einsteins Gleichung <math display="inline"><semantics><mrow><mi>E</mi><mo>=</mo>'
        "<mi>m</mi><msup><mi>c</mi><mn>2</mn></msup></mrow><annotation encoding="
        '"application/x-tex">E = mc^2</annotation></semantics></math> gilt. Ein Diagramm: '
        '<svg viewBox="0 0 10 10"><title>Umsatzkurve</title><style>.a{fill:red}</style>'
        '<path d="M0 0"/><text x="1">Umsatz 2026</text><script>alert(1)</script></svg></p>'
    ) == "<p>Einsteins Gleichung E=mc2 gilt. Ein Diagramm: Umsatzkurve Umsatz 2026</p>"
    # Nothing inside either reaches the stored HTML as markup.
    assert _summary('<svg><foreignObject><img src="x" onerror="alert(1)"></foreignObject>'
                    '</svg><math><mi href="javascript:alert(1)">x</mi></math>') == "x"


@pytest.mark.parametrize(("html", "stored"), [
    # Each ran into the words beside it: "Helloiconworld", "PressOKnow", "onetwofour".
    ('<p>Hello<svg><title>icon</title><path d="M0"/></svg>world</p>',
     "<p>Hello icon world</p>"),
    ("<p>see<math><mi>x</mi></math>here, (<math><mi>y</mi></math>)</p>",
     "<p>see x here, (y)</p>"),
    ("<p>Press<button>OK</button>now</p>", "<p>Press OK now</p>"),
    ("<div>a<TEXTAREA rows=2>typed</TEXTAREA>b</div>", "<div>a typed b</div>"),
    ("<p>one<select><option>two</option><option>four</option></select>three</p>",
     "<p>one two four three</p>"),
    # Where a space or a sign already keeps them apart, none is added.
    ('<p>Press <button class="copy">Copy</button></p>', "<p>Press Copy</p>"),
    ("<p>(<button>OK</button>)</p>", "<p>(OK)</p>"),
])
def test_a_drawing_or_a_control_keeps_the_words_beside_it_apart(html: str,
                                                                 stored: str) -> None:
    assert _summary(html) == stored


def test_the_direction_of_right_to_left_text_is_kept() -> None:
    # nh3 drops dir: Arabic and Hebrew paragraphs were shown left to right.
    assert _summary('<div dir="rtl" lang="ar"><p>مرحبا</p></div><p DIR=rtl>שלום</p>'
                    '<p dir="rtl" onclick="x()">a</p>') == (
        '<div dir="rtl" lang="ar"><p>مرحبا</p></div><p dir="rtl">שלום</p><p dir="rtl">a</p>')


@pytest.mark.parametrize("unit", ["<img data-src=x a", '<img data-src="x', "<noscript a",
                                  "<img data-src=x><noscript>a", "<svg a",
                                  "<math><annotation a", "<svg><style>a",
                                  "<iframe a", "<video src=x"])
def test_many_unclosed_tags_are_read_in_one_pass(unit: str) -> None:
    # A tag without its end must not make every later "<img" read the rest of the value
    # again: 8,000 of them took 18 s that way (and a megabyte hours), where one pass takes
    # milliseconds. The bound is far above one pass and far below the quadratic reading;
    # a child process, so that a regression fails instead of hanging the suite.
    code = ("import sys, time; from signal_feeds.parse.fields import as_html; "
            "t = time.perf_counter(); "
            "as_html(sys.argv[1] * 60_000, {'type': 'text/html'}, 'https://b.example/p'); "
            "print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code, unit], capture_output=True,
                          text=True, timeout=120, check=True)
    assert float(done.stdout) < 10


_ATOM = ('<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom" '
         'xmlns:media="http://search.yahoo.com/mrss/"><title>t</title>'
         "<entry><id>tag:v,2026:1</id><title>A video</title>"
         '<link href="https://video.example/watch?v=1"/>{}</entry></feed>')


def test_plain_text_keeps_its_line_breaks() -> None:
    # A video's description (YouTube's Media RSS) is text with a line per link: shown as
    # HTML, it ran into one line.
    description = "First line &amp; more.\nhttps://example.org/a\n\nLast paragraph."
    feed = parse_feed(_ATOM.format(
        f"<media:group><media:description>{description}</media:description>"
        "</media:group>").encode())
    assert feed.entries[0].summary == (
        "First line &amp; more.<br>https://example.org/a<br><br>Last paragraph.")


def test_plain_text_pretty_printed_in_xml_is_folded_as_before() -> None:
    # An indented line is the document's layout (RFC 4287 lets a reader fold it): no break.
    feed = parse_feed(_ATOM.format(
        "<summary type='text'>A summary wrapped\n      and indented\n      by its feed's "
        "writer.</summary>").encode())
    assert feed.entries[0].summary == (
        "A summary wrapped\n      and indented\n      by its feed's writer.")


def test_a_json_feed_text_post_keeps_every_line() -> None:
    # JSON has no layout of its own: every line break in content_text was written so.
    body = ('{"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": [{"id": "1",'
            ' "url": "https://micro.example/1", "content_text": "Shopping:\\n  - tea\\n  - '
            '<milk>\\r\\nDone."}]}')
    feed = parse_feed(body.encode(), content_type="application/feed+json")
    assert feed.entries[0].content == "Shopping:<br>  - tea<br>  - &lt;milk&gt;<br>Done."


def test_raw_c1_controls_and_del_are_not_stored() -> None:
    # feedparser's Windows-1252 table leaves 0x81, 0x8D, 0x8F, 0x90 and 0x9D (OSC) as
    # they are, and a JSON Feed may carry \u009b: an 8-bit terminal acts on them.
    atom = ('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><entry><id>e</id>'
            '<content type="html">&lt;p&gt;a\u009d0;pwn b\u0081c\x7fd&lt;/p&gt;</content>'
            "</entry></feed>")
    (entry,) = parse_feed(atom.encode()).entries
    assert entry.content == "<p>a0;pwn bcd</p>"


def test_control_characters_escaped_twice_are_not_stored() -> None:
    # "&amp;#27;" is, once the XML is read, the HTML reference &#27;: nh3 wrote the ESC
    # itself into the summary, and `jq -r .summary` then cleared the user's terminal.
    description = ("&lt;p&gt;zebra &amp;#27;[2J &amp;#x1b;]0;pwned&amp;#7; tab&amp;#9;"
                   "&amp;#x85;&amp;#x202e;abc&lt;/p&gt;")
    (entry,) = parse_feed(_described(description)).entries
    assert entry.summary == "<p>zebra [2J ]0;pwned tab\t…\u202eabc</p>"


def test_an_embedded_player_leaves_a_link_to_what_it_played() -> None:
    # WordPress embeds a YouTube video as an <iframe>: frames are not kept, and the post
    # was left with an empty paragraph and no way to the video.
    description = ('&lt;p&gt;Watch:&lt;/p&gt;&lt;p&gt;&lt;iframe width="560" '
                   'src="https://www.youtube.com/embed/abc?feature=oembed&amp;amp;x=1" '
                   'title="Tiny &amp;amp; fast" allowfullscreen&gt;&lt;/iframe&gt;&lt;/p&gt;'
                   '&lt;iframe src="javascript:alert(1)"&gt;&lt;/iframe&gt;'
                   '&lt;iframe src="//player.vimeo.com/video/1"/&gt;after')
    (entry,) = parse_feed(_described(description)).entries
    assert entry.summary == (
        '<p>Watch:</p><p><a href="https://www.youtube.com/embed/abc?feature=oembed&amp;x=1" '
        'rel="noopener noreferrer">Tiny &amp; fast</a></p>'
        '<a href="https://player.vimeo.com/video/1" rel="noopener noreferrer">'
        "https://player.vimeo.com/video/1</a>after")
    # Frame markup inside another tag's attribute is that attribute's text.
    quoted = ("&lt;p&gt;&lt;img alt=\"&lt;iframe src='https://x.example/v'&gt;&lt;/iframe"
              "&gt;\" src=\"https://img.example/i.png\"&gt; tail&lt;/p&gt;")
    (image,) = parse_feed(_described(quoted)).entries
    assert image.summary == '<p><img alt="" src="https://img.example/i.png"> tail</p>'
    # Read as HTML reads tags: a ">" inside quotes ends no tag, a "<" before a space
    # starts none.
    from signal_feeds.parse.sanitize import sanitize

    assert sanitize('<p><img alt="a > b <iframe src=\'https://x.example/v\'></iframe>" '
                    'src="https://img.example/i.png"> tail</p>', body=True) == (
        '<p><img alt="a &gt; b " src="https://img.example/i.png"> tail</p>')
    assert sanitize('<p>1 < 2 <iframe src="https://x.example/v" title="Video"></iframe>'
                    "</p>", body=True) == ('<p>1 &lt; 2 <a href="https://x.example/v" '
                                           'rel="noopener noreferrer">Video</a></p>')
    # A "<" inside another attribute's value starts no tag either.
    assert sanitize('<img src="https://e.example/i.png" title="a<br>b" alt="<iframe '
                    'src=https://y.example/v></iframe>"> after', body=True) == (
        '<img src="https://e.example/i.png" title="a&lt;br&gt;b" alt=""> after')


def _described(description: str) -> bytes:
    """An RSS document of one item with this (escaped) description."""
    return ('<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
            f"<description>{description}</description></item></channel></rss>").encode()


@pytest.mark.parametrize("order", [
    # Megaphone-style: the iTunes summary first, the show notes last.
    ("itunes", "description", "encoded"),
    ("description", "itunes", "encoded"),
    ("description", "encoded", "itunes"),
])
def test_a_podcast_episode_keeps_its_full_show_notes(order: tuple[str, ...]) -> None:
    # After an <itunes:summary>, feedparser reads <description> as a first content and
    # <content:encoded> as a second: the first was stored, and the show notes (with
    # their links, and every word a search should find in them) were lost.
    parts = {"itunes": "<itunes:summary>Worms, with a guest.</itunes:summary>",
             "description": "<description><![CDATA[<p>Worms, with a guest.</p>]]>"
                            "</description>",
             "encoded": "<content:encoded><![CDATA[<p>Worms, with a guest. Show notes: "
                        '<a href="https://pod.example/notes/12">notes</a></p>]]>'
                        "</content:encoded>"}
    body = ('<?xml version="1.0"?><rss version="2.0" '
            'xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><title>t'
            "</title><link>https://pod.example/</link><item><guid>ep12</guid>"
            + "".join(parts[name] for name in order) + "</item></channel></rss>")
    (entry,) = parse_feed(body.encode()).entries
    assert entry.content == ('<p>Worms, with a guest. Show notes: <a href="https://pod.example/'
                             'notes/12" rel="noopener noreferrer">notes</a></p>')


@pytest.mark.parametrize(("html", "stored"), [
    # Medium's view counter, Jetpack's, FeedBurner's: one pixel square, or none.
    ('<p>It was fast.</p><img src="https://medium.com/_/stat?event=post.clientViewed" '
     'width="1" height="1" alt="">', "<p>It was fast.</p>"),
    ("<IMG SRC=https://pixel.wp.com/b.gif?post=1 HEIGHT=1 WIDTH=1 style=display:none>end",
     "end"),
    ('<img src="/t.gif" width="1px" height="0"/>', ""),
    # A picture with a size of its own, one thin side only, or no size at all stays.
    ('<img src="/rule.png" width="600" height="1">',
     '<img src="https://blog.example/rule.png" width="600" height="1">'),
    ('<img src="/a.png" alt="width=1 height=1">',
     '<img src="https://blog.example/a.png" alt="width=1 height=1">'),
])
def test_a_one_pixel_image_is_not_stored(html: str, stored: str) -> None:
    assert _summary(html) == stored
