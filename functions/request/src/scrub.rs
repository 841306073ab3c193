//! Credentials scrubbed out of everything a vendor sends back before it
//! travels on (error texts, excerpts, log lines, URLs): [`Scrubber`].
//!
//! A vendor may echo the request anywhere (an error page, a JSON body, a
//! `Location`, a next link), and what it echoes is escaped on the way to
//! us and again by us: JSON (`\/`, `\"`, `\uXXXX`: PHP's `json_encode`
//! writes `/` as `\/`), Rust's `{:?}` (`\"`, `\\`), percent-encoding (any
//! encode set: a query's, a path's, `+` for a space; `%XX` in either case).
//! A [`Scrubber`] therefore matches each credential *character by
//! character*: each character may appear as itself or in any of its
//! escaped spellings, stacked up to [`LAYERS`] deep (a JSON escape of a
//! percent-encoded secret, the `{:?}` of that, …). Every mix of spellings
//! is one match, so a path that percent-encodes only some characters of a
//! token is caught as well as a fully encoded one. Letters match in either
//! ASCII case (a vendor that upper- or lower-cases what it echoes). The base64 forms of
//! each credential (standard and URL-safe, padded or not) are credentials
//! of their own, matched the same way.
//!
//! Cutting comes after scrubbing, never before ([`Scrubber::cut`]): the
//! whole text is scrubbed, then cut on a character boundary (a
//! `<redacted>` marker is never split), then a fragment of a credential
//! longer than [`EDGE_FRAGMENT_CHARS`] characters left at either edge (the
//! start of a secret before the cut, the end of one a vendor cut) is
//! replaced by `<redacted>` too.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use base64::Engine;

/// What replaces a credential.
pub const MARK: &str = "<redacted>";

/// Credentials shorter than this many bytes are not scrubbed: 4 (they would
/// redact ordinary words).
pub const MIN_SECRET_BYTES: usize = 4;

/// A credential fragment at an excerpt's edge longer than this many
/// characters is redacted: 8 (a shorter one is too little of a secret to
/// use, and trimming it would eat ordinary text).
pub const EDGE_FRAGMENT_CHARS: usize = 8;

/// How many escapings may be stacked on a credential and still be
/// recognised: 3 (a vendor's JSON over a percent-encoded value, then our
/// own `{:?}`).
pub const LAYERS: usize = 3;

/// Spellings kept per character: 2048. Past it a character's deeper
/// stackings are not added (a backslash stacked three deep has ~500).
const MAX_SPELLINGS: usize = 2048;

/// Matches credentials in every spelling (see the module docs) and
/// replaces them by [`MARK`]. Built once per set of credentials
/// ([`crate::auth::Credentials::scrubber`]); its `Debug` shows no secret.
#[derive(Clone, Default)]
pub struct Scrubber {
    patterns: Vec<Pattern>,
    /// Bytes a match may start with (any pattern).
    first: ByteSet,
    /// The longest text any pattern matches, in bytes.
    longest: usize,
}

/// An empty scrubber (no credentials): scrubbing is the identity, cutting
/// only cuts.
pub static NONE: Scrubber = Scrubber { patterns: Vec::new(), first: ByteSet([0; 4]), longest: 0 };

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scrubber({} patterns, <redacted>)", self.patterns.len())
    }
}

/// One credential: for each of its characters, every way it may be written.
#[derive(Clone)]
struct Pattern {
    steps: Vec<Arc<Spellings>>,
    /// The longest text it matches, in bytes.
    longest: usize,
}

/// The spellings of one character, and the bytes they start and end with.
struct Spellings {
    all: Vec<String>,
    first: ByteSet,
    last: ByteSet,
}

#[derive(Clone, Copy, Default)]
struct ByteSet([u64; 4]);

impl ByteSet {
    fn insert(&mut self, byte: u8) {
        self.0[usize::from(byte >> 6)] |= 1 << (byte & 63);
    }

    fn contains(&self, byte: u8) -> bool {
        self.0[usize::from(byte >> 6)] & (1 << (byte & 63)) != 0
    }

    fn union(&mut self, other: &ByteSet) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine |= theirs;
        }
    }
}

/// An escaping a text may go through on its way.
#[derive(Clone, Copy)]
enum Layer {
    /// `%XX` (either case) for anything but `A-Z a-z 0-9 - . _ ~`, `+` for
    /// a space: whichever encode set an encoder uses, it is a subset.
    Percent,
    /// JSON string escapes (RFC 8259 §7): `\"`, `\\`, `\/`, `\n`, …,
    /// `\uXXXX` for controls, non-ASCII (`ensure_ascii`) and `<>&'` (Go,
    /// PHP's `JSON_HEX_*`).
    Json,
    /// Rust's `str` `Debug`: `\"`, `\\`, `\n`, `\r`, `\t`, `\0`,
    /// `\u{…}` for other controls and non-printables.
    Debug,
}

const LAYER_KINDS: [Layer; 3] = [Layer::Percent, Layer::Json, Layer::Debug];

impl Layer {
    /// The ways this layer writes `c`, `c` itself first.
    fn escapes(self, c: char) -> Vec<String> {
        let mut out = vec![c.to_string()];
        match self {
            Layer::Percent => {
                if !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')) {
                    let mut utf8 = [0u8; 4];
                    let bytes = c.encode_utf8(&mut utf8).as_bytes();
                    out.push(bytes.iter().map(|b| format!("%{b:02X}")).collect());
                    out.push(bytes.iter().map(|b| format!("%{b:02x}")).collect());
                    if c == ' ' {
                        out.push("+".into());
                    }
                }
            }
            Layer::Json => {
                match c {
                    '"' => out.push(r#"\""#.into()),
                    '\\' => out.push(r"\\".into()),
                    '/' => out.push(r"\/".into()),
                    '\n' => out.push(r"\n".into()),
                    '\r' => out.push(r"\r".into()),
                    '\t' => out.push(r"\t".into()),
                    '\u{8}' => out.push(r"\b".into()),
                    '\u{c}' => out.push(r"\f".into()),
                    _ => {}
                }
                if c.is_control() || !c.is_ascii() || matches!(c, '<' | '>' | '&' | '\'') {
                    let mut units = [0u16; 2];
                    let units = c.encode_utf16(&mut units);
                    out.push(units.iter().map(|u| format!("\\u{u:04X}")).collect());
                    out.push(units.iter().map(|u| format!("\\u{u:04x}")).collect());
                }
            }
            Layer::Debug => match c {
                '"' => out.push(r#"\""#.into()),
                '\\' => out.push(r"\\".into()),
                '\n' => out.push(r"\n".into()),
                '\r' => out.push(r"\r".into()),
                '\t' => out.push(r"\t".into()),
                '\0' => out.push(r"\0".into()),
                _ if c.is_control() || !c.is_ascii() => out.push(format!("\\u{{{:x}}}", u32::from(c))),
                _ => {}
            },
        }
        out
    }

    /// Every way this layer may write `text`: each character escaped or
    /// not, independently (encoders differ in what they escape).
    fn apply(self, text: &str, into: &mut BTreeSet<String>) {
        let mut partial = vec![String::new()];
        for c in text.chars() {
            let escapes = self.escapes(c);
            if partial.len() * escapes.len() > MAX_SPELLINGS {
                return;
            }
            partial = partial.iter().flat_map(|p| escapes.iter().map(move |e| format!("{p}{e}"))).collect();
        }
        into.extend(partial);
    }
}

/// Every spelling of `c`: itself in either ASCII case (a vendor may echo a
/// credential upper-cased: a trial's alert held `SK_LIVE_…`), and up to
/// [`LAYERS`] escapings of those stacked.
fn spellings_of(c: char) -> Spellings {
    let mut all: BTreeSet<String> =
        [c, c.to_ascii_uppercase(), c.to_ascii_lowercase()].iter().map(char::to_string).collect();
    let mut frontier = all.clone();
    for _ in 0..LAYERS {
        let mut next = BTreeSet::new();
        for text in &frontier {
            for layer in LAYER_KINDS {
                layer.apply(text, &mut next);
            }
        }
        let fresh: BTreeSet<String> = next.difference(&all).cloned().collect();
        if fresh.is_empty() || all.len() + fresh.len() > MAX_SPELLINGS {
            break;
        }
        all.extend(fresh.iter().cloned());
        frontier = fresh;
    }
    let (mut first, mut last) = (ByteSet::default(), ByteSet::default());
    for spelling in &all {
        if let (Some(&a), Some(&z)) = (spelling.as_bytes().first(), spelling.as_bytes().last()) {
            first.insert(a);
            last.insert(z);
        }
    }
    Spellings { all: all.into_iter().collect(), first, last }
}

impl Pattern {
    fn new(secret: &str, cache: &mut HashMap<char, Arc<Spellings>>) -> Self {
        let steps: Vec<Arc<Spellings>> =
            secret.chars().map(|c| cache.entry(c).or_insert_with(|| Arc::new(spellings_of(c))).clone()).collect();
        let longest = steps.iter().map(|s| s.all.iter().map(String::len).max().unwrap_or(0)).sum();
        Self { steps, longest }
    }

    /// The end of the longest match starting at `start`.
    fn longest_at(&self, text: &[u8], start: usize) -> Option<usize> {
        let mut frontier = vec![start];
        for step in &self.steps {
            let mut next = Vec::new();
            for &pos in &frontier {
                let rest = &text[pos..];
                if rest.first().is_none_or(|&b| !step.first.contains(b)) {
                    continue;
                }
                next.extend(step.all.iter().filter(|s| rest.starts_with(s.as_bytes())).map(|s| pos + s.len()));
            }
            if next.is_empty() {
                return None;
            }
            next.sort_unstable();
            next.dedup();
            frontier = next;
        }
        frontier.last().copied()
    }

    /// Whether `tail` is the beginning of a spelling of this credential
    /// (possibly ending inside one character's escape).
    fn starts(&self, tail: &[u8]) -> bool {
        self.partial(tail, Edge::Start)
    }

    /// Whether `head` is the end of a spelling of this credential.
    fn ends(&self, head: &[u8]) -> bool {
        self.partial(head, Edge::End)
    }

    /// Whether `text`, read from `edge`, is a spelling of this credential
    /// cut short (or whole): its characters matched one spelling after
    /// another from that edge, the last one possibly in part.
    fn partial(&self, text: &[u8], edge: Edge) -> bool {
        let mut frontier = vec![edge.origin(text)];
        let steps: Box<dyn Iterator<Item = &Arc<Spellings>>> = match edge {
            Edge::Start => Box::new(self.steps.iter()),
            Edge::End => Box::new(self.steps.iter().rev()),
        };
        for step in steps {
            let mut next = Vec::new();
            for &pos in &frontier {
                let rest = edge.rest(text, pos);
                match edge.byte(rest) {
                    None => return true,
                    Some(b) if !edge.bytes(step).contains(b) => continue,
                    Some(_) => {}
                }
                for spelling in &step.all {
                    let spelling = spelling.as_bytes();
                    if edge.takes(rest, spelling) {
                        next.push(edge.advance(pos, spelling.len()));
                    } else if edge.takes(spelling, rest) {
                        return true;
                    }
                }
            }
            if next.is_empty() {
                return false;
            }
            next.sort_unstable();
            next.dedup();
            frontier = next;
        }
        frontier.contains(&edge.far_end(text))
    }
}

/// Which edge of a text a partial match is read from: a text's start (the
/// excerpt's tail, read forward) or its end (its head, read backward).
#[derive(Clone, Copy)]
enum Edge {
    Start,
    End,
}

impl Edge {
    /// Where reading begins.
    fn origin(self, text: &[u8]) -> usize {
        match self {
            Edge::Start => 0,
            Edge::End => text.len(),
        }
    }

    /// Where a whole match ends.
    fn far_end(self, text: &[u8]) -> usize {
        self.origin(text).abs_diff(text.len())
    }

    /// What is left to read from `pos`.
    fn rest(self, text: &[u8], pos: usize) -> &[u8] {
        match self {
            Edge::Start => &text[pos..],
            Edge::End => &text[..pos],
        }
    }

    /// The next byte to read in `rest`.
    fn byte(self, rest: &[u8]) -> Option<u8> {
        match self {
            Edge::Start => rest.first().copied(),
            Edge::End => rest.last().copied(),
        }
    }

    /// The bytes a spelling of `step` may begin with, read from this edge.
    fn bytes(self, step: &Spellings) -> &ByteSet {
        match self {
            Edge::Start => &step.first,
            Edge::End => &step.last,
        }
    }

    /// Whether `text` begins (read from this edge) with `part`.
    fn takes(self, text: &[u8], part: &[u8]) -> bool {
        match self {
            Edge::Start => text.starts_with(part),
            Edge::End => text.ends_with(part),
        }
    }

    /// `pos` moved past `len` bytes.
    fn advance(self, pos: usize, len: usize) -> usize {
        match self {
            Edge::Start => pos + len,
            Edge::End => pos - len,
        }
    }
}

impl Scrubber {
    /// A scrubber of `secrets` (each at least [`MIN_SECRET_BYTES`] long;
    /// shorter ones are left out) and of their base64 forms.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut texts: BTreeSet<String> = BTreeSet::new();
        for secret in secrets.into_iter().filter(|s| s.len() >= MIN_SECRET_BYTES) {
            texts.insert(secret.to_string());
            let bytes = secret.as_bytes();
            use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
            for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
                texts.insert(engine.encode(bytes));
            }
        }
        let mut cache = HashMap::new();
        let patterns: Vec<Pattern> = texts.iter().map(|t| Pattern::new(t, &mut cache)).collect();
        let mut first = ByteSet::default();
        for pattern in &patterns {
            if let Some(step) = pattern.steps.first() {
                first.union(&step.first);
            }
        }
        let longest = patterns.iter().map(|p| p.longest).max().unwrap_or(0);
        Self { patterns, first, longest }
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The end of the longest match of any credential at `start`.
    fn match_at(&self, text: &[u8], start: usize) -> Option<usize> {
        if !self.first.contains(text[start]) {
            return None;
        }
        self.patterns.iter().filter_map(|p| p.longest_at(text, start)).max()
    }

    /// `text` with every credential, in any spelling, replaced by [`MARK`]
    /// (leftmost, longest first).
    pub fn scrub(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let (mut at, mut copied) = (0, 0);
        while at < bytes.len() {
            match self.match_at(bytes, at) {
                // A spelling starts with a whole character and is whole
                // characters: `at` and `end` are character boundaries.
                Some(end) => {
                    out.push_str(&text[copied..at]);
                    out.push_str(MARK);
                    (at, copied) = (end, end);
                }
                None => at += 1,
            }
        }
        out.push_str(&text[copied..]);
        out
    }

    /// Whether `text` holds a credential in any spelling.
    pub fn contains(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        !self.is_empty() && (0..bytes.len()).any(|at| self.match_at(bytes, at).is_some())
    }

    /// At most about `max` bytes of `text`, safe to show: the whole text
    /// scrubbed ([`Scrubber::scrub`]), then cut on a character boundary
    /// (extended to the end of a [`MARK`] the cut would split), then a
    /// fragment of a credential longer than [`EDGE_FRAGMENT_CHARS`]
    /// characters at its end or its start replaced by [`MARK`].
    pub fn cut(&self, text: &str, max: usize) -> String {
        // A match that starts before `max` ends before `max + longest`:
        // scrubbing that much gives the same first `max` bytes as
        // scrubbing all of a long body.
        let window = floor_boundary(text, max.saturating_add(self.longest).saturating_add(MARK.len()));
        let clean = self.scrub(&text[..window]);
        let mut end = floor_boundary(&clean, max);
        if end < clean.len() {
            let from = floor_boundary(&clean, end.saturating_sub(MARK.len() - 1));
            if let Some(at) = clean[from..].find(MARK).map(|i| from + i).filter(|at| *at < end) {
                end = end.max(at + MARK.len());
            }
        }
        self.trim_edges(&clean[..end])
    }

    /// `text` with a credential fragment longer than
    /// [`EDGE_FRAGMENT_CHARS`] characters at its end (the start of a
    /// credential) or at its start (the end of one) replaced by [`MARK`].
    pub fn trim_edges(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        let mut end = text.len();
        let mut marks = (false, false);
        let from = floor_boundary(text, text.len().saturating_sub(self.longest));
        for (at, _) in text[from..].char_indices().map(|(i, c)| (from + i, c)) {
            let tail = &text[at..];
            if tail.chars().count() <= EDGE_FRAGMENT_CHARS {
                break;
            }
            if self.patterns.iter().any(|p| p.starts(tail.as_bytes())) {
                (end, marks.1) = (at, true);
                break;
            }
        }
        let mut start = 0;
        let head_room = floor_boundary(text, self.longest.min(end));
        let mut ends: Vec<usize> = text[..head_room].char_indices().map(|(i, _)| i).skip(1).collect();
        ends.push(head_room);
        for at in ends.into_iter().rev() {
            let head = &text[..at];
            if head.chars().count() <= EDGE_FRAGMENT_CHARS {
                break;
            }
            if self.patterns.iter().any(|p| p.ends(head.as_bytes())) {
                (start, marks.0) = (at, true);
                break;
            }
        }
        let mut out = String::with_capacity(end - start + 2 * MARK.len());
        if marks.0 {
            out.push_str(MARK);
        }
        out.push_str(&text[start..end.max(start)]);
        if marks.1 {
            out.push_str(MARK);
        }
        out
    }

    /// The first `max` bytes of a body as text (invalid UTF-8 replaced),
    /// with credential-looking values redacted
    /// ([`contracts::spec::redact_credentials_in_text`]), cut as
    /// [`Scrubber::cut`] does.
    pub fn excerpt(&self, body: &[u8], max: usize) -> String {
        let window = body.len().min(max.saturating_add(self.longest).saturating_add(MARK.len() + 4));
        let text = String::from_utf8_lossy(&body[..window]);
        // What looks like a credential, though not one of the spec's (a key
        // the vendor echoes, a session token in a 500's body).
        let text = contracts::spec::redact_credentials_in_text(&text);
        let cut = self.cut(&text, max);
        // A character split by the window shows as U+FFFD at the end.
        cut.trim_end_matches('\u{FFFD}').to_string()
    }

    /// `url` as logs and errors may show it: without user info, each query
    /// parameter whose value (or name) holds a credential, and each one
    /// named like a credential ([`contracts::redacted_url`]), shown as
    /// [`contracts::REDACTED_VALUE`] (`?page=7&key=***`), the rest of the
    /// query as sent, and its host and path scrubbed.
    pub fn url(&self, url: &url::Url) -> String {
        let mut url = url.clone();
        if url.query_pairs().any(|(name, value)| self.contains(&name) || self.contains(&value)) {
            let pairs: Vec<(String, String)> =
                url.query_pairs().map(|(name, value)| (name.into_owned(), value.into_owned())).collect();
            let masked =
                |text: &String| if self.contains(text) { contracts::REDACTED_VALUE.to_string() } else { text.clone() };
            url.query_pairs_mut().clear().extend_pairs(pairs.iter().map(|(name, value)| (masked(name), masked(value))));
        }
        self.scrub(&contracts::redacted_url(&url))
    }

    /// Where `url` holds a credential, if it does: `its host`, `its path`,
    /// `query parameter <name>` (the name scrubbed), `its query` or `its
    /// fragment`.
    pub fn found_in_url(&self, url: &url::Url) -> Option<String> {
        if url.host_str().is_some_and(|host| self.contains(host)) {
            return Some("its host".into());
        }
        if self.contains(url.path()) {
            return Some("its path".into());
        }
        if let Some(query) = url.query().filter(|q| self.contains(q)) {
            let pair = url.query_pairs().find(|(name, value)| self.contains(name) || self.contains(value));
            return Some(match pair {
                Some((name, _)) => format!("query parameter `{}`", self.scrub(&name)),
                None => format!("its query ({} bytes)", query.len()),
            });
        }
        url.fragment().filter(|f| self.contains(f)).map(|_| "its fragment".into())
    }
}

/// The largest character boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TOKEN: &str = "atk/SECRET+slash/9f8e7d6c5b";

    fn json_escaped(text: &str) -> String {
        let quoted = serde_json::to_string(text).expect("json");
        quoted[1..quoted.len() - 1].replace('/', r"\/")
    }

    /// `{:?}` without the quotes around.
    fn debug(text: &str) -> String {
        let quoted = format!("{text:?}");
        quoted[1..quoted.len() - 1].to_string()
    }

    fn percent(text: &str) -> String {
        url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
    }

    #[test]
    fn every_spelling_and_stacking_is_redacted() {
        let scrubber = Scrubber::new([TOKEN, "pa\"ss\\w0rd"]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(TOKEN);
        let forms = [
            TOKEN.to_string(),
            json_escaped(TOKEN),
            debug(TOKEN),
            percent(TOKEN),
            percent(TOKEN).replace("%2F", "%2f").replace("%2B", "%2b"),
            json_escaped(&percent(TOKEN)),
            debug(&json_escaped(&percent(TOKEN))),
            percent(&percent(TOKEN)),
            debug(&json_escaped("pa\"ss\\w0rd")),
            debug("pa\"ss\\w0rd"),
            b64.clone(),
            json_escaped(&b64),
            // A path encodes the plus, not the slashes; then JSON, then `{:?}`.
            TOKEN.replace('+', "%2B"),
            json_escaped(&TOKEN.replace('+', "%2B")),
            debug(&json_escaped(&TOKEN.replace('+', "%2B"))),
            // Echoed in another case (a trial: `SK_LIVE_…` in an alert).
            TOKEN.to_ascii_uppercase(),
            TOKEN.to_ascii_lowercase(),
            json_escaped(&TOKEN.to_ascii_uppercase()),
        ];
        for form in forms {
            let text = format!("before {form} after");
            let clean = scrubber.scrub(&text);
            assert_eq!(clean, format!("before {MARK} after"), "{form}");
            assert!(scrubber.contains(&text) && !scrubber.contains(&clean), "{form}");
        }
        assert_eq!(scrubber.scrub("nothing here"), "nothing here");
        assert!(!format!("{scrubber:?}").contains("SECRET"));
    }

    #[test]
    fn a_cut_never_leaves_more_than_eight_characters_of_a_secret() {
        let scrubber = Scrubber::new([TOKEN]);
        for at in 0..=TOKEN.len() {
            let text = format!("{}{TOKEN} and more", "x".repeat(200 - at));
            let cut = scrubber.cut(&text, 200);
            for n in EDGE_FRAGMENT_CHARS + 1..=TOKEN.len() {
                assert!(!cut.contains(&TOKEN[..n]), "{at}: {cut}");
            }
            assert!(cut.len() <= 200 + MARK.len(), "{at}: {}", cut.len());
        }
        // A vendor that cut the secret itself, at either end.
        let cut = scrubber.cut(&format!("{} and", &TOKEN[5..]), 200);
        assert_eq!(cut, format!("{MARK} and"));
        let cut = scrubber.cut(&format!("starts {}", &TOKEN[..12]), 200);
        assert_eq!(cut, format!("starts {MARK}"));
        // Eight characters or fewer stay (ordinary text).
        assert_eq!(scrubber.cut("ends atk/SECR", 200), "ends atk/SECR");
    }

    #[test]
    fn urls_lose_a_token_in_their_path_and_say_where_it_was() {
        let scrubber = Scrubber::new(["tok en/4f9a2b"]);
        let url = url::Url::parse("https://api.example.com/v1/tok%20en/4f9a2b/items?cursor=2").expect("url");
        assert_eq!(scrubber.url(&url), format!("https://api.example.com/v1/{MARK}/items?cursor=2"));
        assert_eq!(scrubber.found_in_url(&url).as_deref(), Some("its path"));
        // A query value holding the credential, under any name, is masked; the page parameters stay.
        let url = url::Url::parse("https://api.example.com/v1?page=7&per_page=100&k=tok%20en%2F4f9a2b").expect("url");
        assert_eq!(scrubber.url(&url), "https://api.example.com/v1?page=7&per_page=100&k=***");
        let url = url::Url::parse("https://api.example.com/v1?state=x%2Ftok%2520en%2F4f9a2b").expect("url");
        assert_eq!(scrubber.found_in_url(&url).as_deref(), Some("query parameter `state`"));
        let url = url::Url::parse("https://api.example.com/v1?cursor=2").expect("url");
        assert_eq!(scrubber.found_in_url(&url), None);
    }

    proptest! {
        #[test]
        fn scrub_then_cut_never_shows_a_fragment(
            secret in "[A-Za-z0-9/+=\"\\\\%&: _.-]{9,40}",
            before in "[a-z {}\":,]{0,260}",
            after in "[a-z {}\":,]{0,100}",
            form in 0usize..5,
            max in 20usize..300,
        ) {
            let scrubber = Scrubber::new([secret.as_str()]);
            let shown = match form {
                0 => secret.clone(),
                1 => json_escaped(&secret),
                2 => format!("{secret:?}"),
                3 => percent(&secret),
                _ => json_escaped(&percent(&secret)),
            };
            let text = format!("{before}{shown}{after}");
            let cut = scrubber.cut(&text, max);
            let chars: Vec<char> = secret.chars().collect();
            for window in chars.windows(EDGE_FRAGMENT_CHARS + 1) {
                let fragment: String = window.iter().collect();
                prop_assert!(!cut.contains(&fragment), "{fragment:?} in {cut:?}");
            }
        }
    }
}
