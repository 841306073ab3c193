//! Payload decoding: bytes or a file -> one record's text at a time.
//!
//! Accepted layouts ([`PayloadFormat`]): a JSON array; an object holding the
//! array at a JSON pointer (`/data/items`); NDJSON (one record per line,
//! blank lines skipped, `\r\n` accepted). Whatever the layout, a gzip stream
//! (magic bytes `1f 8b`, multi-member allowed) is decompressed on the fly
//! and a UTF-8 byte-order mark is skipped.
//!
//! The [`Framer`] reads in chunks of [`CHUNK_BYTES`] and holds at most one
//! record plus one chunk in memory, whatever the payload's size: this is
//! what keeps Persist's memory bounded on claim-check objects of hundreds of
//! MB (the object is first spilled to a local file, read twice).
//!
//! It reads at most a given number of bytes (after decompression; Persist's
//! `MAX_PAGE_BYTES`), through [`Read::take`]: a payload that holds more
//! fails as a whole once one byte past the bound is read, so a small gzip
//! stream of one huge record (3 MB that inflate to a 3 GiB string) can
//! neither exhaust memory nor take the time to inflate all of it.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use bytes::Bytes;
use contracts::{Layout, PayloadFormat};

use crate::json::{Tape, Tok, unescape};
use tributary_core::json::utf8::escape_invalid_utf8;

/// Bytes read from the payload at a time.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Where a page's payload is.
#[derive(Clone, Debug)]
pub enum PageSource {
    /// In memory (an inline payload, or a small object).
    Bytes(Bytes),
    /// A local file (a claim-check object spilled to disk).
    File(PathBuf),
}

/// A payload that cannot be read as records.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Reading or decompressing failed (a gzip stream cut short, say).
    #[error("{message}")]
    Io {
        /// What failed, with the I/O error's text.
        message: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The payload holds more than `limit` bytes after decompression.
    #[error(
        "the payload holds more than {limit} bytes (after decompression), the most MAX_PAGE_BYTES allows; split it \
         into smaller pages"
    )]
    TooLarge {
        /// The bound, in bytes (`max_page_bytes`).
        limit: u64,
    },
    /// The bytes are not what the layout says.
    #[error("{0}")]
    Layout(String),
    /// A record's text is not valid JSON or not UTF-8.
    #[error("record {index} (byte {offset} of the payload): {message}")]
    Record {
        /// Position of the record in the payload.
        index: u64,
        /// Byte offset of the record's start, after decompression.
        offset: u64,
        /// What is wrong.
        message: String,
    },
}

fn io_error(source: std::io::Error) -> DecodeError {
    let text = source.to_string();
    let message = if source.kind() == std::io::ErrorKind::UnexpectedEof || text.contains("corrupt deflate") {
        format!("gzip stream is cut short or corrupt: {text}")
    } else {
        format!("cannot read the payload: {text}")
    };
    DecodeError::Io { message, source }
}

/// Opens a payload, decompressing gzip when its first bytes say so.
///
/// # Errors
/// [`DecodeError::Io`] when the file cannot be opened.
pub fn open(source: &PageSource) -> Result<Box<dyn BufRead + Send>, DecodeError> {
    let mut reader: Box<dyn BufRead + Send> = match source {
        PageSource::Bytes(bytes) => Box::new(std::io::Cursor::new(bytes.clone())),
        PageSource::File(path) => Box::new(BufReader::with_capacity(
            CHUNK_BYTES,
            File::open(path).map_err(|source| DecodeError::Io {
                message: format!("cannot open {}: {source}", path.display()),
                source,
            })?,
        )),
    };
    let head = reader.fill_buf().map_err(io_error)?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(BufReader::with_capacity(CHUNK_BYTES, flate2::bufread::MultiGzDecoder::new(reader))))
    } else {
        Ok(reader)
    }
}

enum Mode {
    Ndjson,
    Array { done: bool, first: bool },
}

/// What must follow the records array: the rest of the objects it sits in
/// (one per pointer segment), then nothing but whitespace.
struct Trailer {
    enclosing: usize,
}

/// Splits a payload into records' texts, reading at most a bound of bytes.
pub struct Framer<R> {
    reader: std::io::Take<R>,
    limit: u64,
    read: u64,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    mode: Mode,
    consumed: u64,
    index: u64,
    scratch_tape: Tape,
    trailer: Trailer,
    /// The last record's text with its bytes that are not UTF-8 escaped
    /// (see [`Framer::next_record`]).
    escaped: String,
    /// What [`Framer::fingerprint`] is made of.
    seen: Seen,
}

/// Bytes of the last record's beginning a page's fingerprint keeps: enough
/// for the key fields records usually begin with (`{"id": 1042, ...`).
const FINGERPRINT_HEAD: usize = 96;

/// The first record's digest and the last record's length and beginning,
/// kept as records are framed (a copy of at most [`FINGERPRINT_HEAD`]
/// bytes per record).
#[derive(Clone, Debug, Default)]
struct Seen {
    first: u64,
    last_len: usize,
    last_head: Vec<u8>,
}

impl Framer<Box<dyn BufRead + Send>> {
    /// Opens `source` and positions on the first record; at most
    /// `max_bytes` bytes of it (after decompression) are read.
    ///
    /// # Errors
    /// [`DecodeError`]: unreadable payload, a layout that does not match,
    /// a pointer that does not lead to an array;
    /// [`DecodeError::TooLarge`] once more than `max_bytes` are read.
    pub fn open(source: &PageSource, format: &PayloadFormat, max_bytes: u64) -> Result<Self, DecodeError> {
        Framer::new(open(source)?, format, max_bytes)
    }
}

impl<R: Read> Framer<R> {
    /// Positions on the first record of `reader`, of which at most
    /// `max_bytes` bytes are read: `reader` is read through
    /// [`Read::take`]`(max_bytes + 1)`, so however much it could produce,
    /// no more than one byte past the bound is ever asked of it (nor
    /// buffered: the buffer holds at most that plus [`CHUNK_BYTES`]).
    ///
    /// # Errors
    /// As [`Framer::open`].
    pub fn new(reader: R, format: &PayloadFormat, max_bytes: u64) -> Result<Self, DecodeError> {
        let mut framer = Framer {
            reader: reader.take(max_bytes.saturating_add(1)),
            limit: max_bytes,
            read: 0,
            buf: Vec::new(),
            start: 0,
            end: 0,
            eof: false,
            mode: Mode::Ndjson,
            consumed: 0,
            index: 0,
            scratch_tape: Tape::default(),
            escaped: String::new(),
            trailer: Trailer { enclosing: 0 },
            seen: Seen::default(),
        };
        framer.fill()?;
        if framer.buf[framer.start..framer.end].starts_with(&[0xEF, 0xBB, 0xBF]) {
            framer.advance(3);
        }
        let first = framer.peek_non_ws()?;
        let layout = match (format.layout, first, &format.records_pointer) {
            (Layout::Ndjson, _, Some(pointer)) => {
                return Err(DecodeError::Layout(format!(
                    "records_pointer {pointer:?} applies to the json layout, not ndjson"
                )));
            }
            (Layout::Auto, Some(b'['), _) | (Layout::Auto, Some(b'{'), Some(_)) => Layout::Json,
            (Layout::Auto, Some(b'{') | None, None) => Layout::Ndjson,
            (Layout::Auto, Some(other), _) => {
                return Err(DecodeError::Layout(format!(
                    "the payload starts with {}; expected a JSON array, an object holding one (with \
                     records_pointer) or NDJSON records",
                    describe_byte(other)
                )));
            }
            (layout, _, _) => layout,
        };
        if layout == Layout::Json {
            let pointer = format.records_pointer.as_deref().unwrap_or("");
            framer.trailer.enclosing = if pointer.is_empty() { 0 } else { pointer.split('/').count() - 1 };
            framer.descend(pointer)?;
            framer.mode = Mode::Array { done: false, first: true };
        }
        Ok(framer)
    }

    /// Whether each record is a line of its own (NDJSON), so that a line
    /// that is not JSON spoils no other record; in a JSON document a
    /// syntax error makes the whole document unreadable.
    pub fn lines_are_records(&self) -> bool {
        matches!(self.mode, Mode::Ndjson)
    }

    /// Records read so far.
    pub fn records_read(&self) -> u64 {
        self.index
    }

    /// The records read so far, told apart from another page's: 16 hex
    /// digits of FNV-1a over their count, the first record's text and the
    /// last one's length and first 96 bytes; `None` before any record.
    /// Two pages of a run with the same fingerprint hold the same records
    /// (a vendor that ignored the page's offset and served one page
    /// again), which the run's completion reports (`ledger`'s
    /// `Manifest::repeated`). Pages of other records differ in their first
    /// record, whatever their envelopes (`next` links, echoed offsets).
    pub fn fingerprint(&self) -> Option<String> {
        (self.index > 0).then(|| {
            let mut bytes = Vec::with_capacity(32 + self.seen.last_head.len());
            bytes.extend_from_slice(&self.index.to_le_bytes());
            bytes.extend_from_slice(&self.seen.first.to_le_bytes());
            bytes.extend_from_slice(&(self.seen.last_len as u64).to_le_bytes());
            bytes.extend_from_slice(&self.seen.last_head);
            contracts::digest::fnv1a_hex(&bytes)
        })
    }

    /// Payload bytes consumed so far (after decompression).
    pub fn bytes_read(&self) -> u64 {
        self.consumed
    }

    fn fill(&mut self) -> Result<bool, DecodeError> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 && self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > self.buf.len() / 2 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < self.end + CHUNK_BYTES {
            self.buf.resize(self.end + CHUNK_BYTES, 0);
        }
        let n = loop {
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(n) => break n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(io_error(err)),
            }
        };
        if n == 0 {
            self.eof = true;
        }
        self.read += n as u64;
        if self.read > self.limit {
            return Err(DecodeError::TooLarge { limit: self.limit });
        }
        self.end += n;
        Ok(n > 0)
    }

    fn advance(&mut self, n: usize) {
        self.start += n;
        self.consumed += n as u64;
    }

    /// The next byte that is not whitespace (consuming the whitespace).
    fn peek_non_ws(&mut self) -> Result<Option<u8>, DecodeError> {
        loop {
            while self.start < self.end {
                match self.buf[self.start] {
                    b' ' | b'\n' | b'\r' | b'\t' => self.advance(1),
                    b => return Ok(Some(b)),
                }
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    fn expect(&mut self, byte: u8, context: &str) -> Result<(), DecodeError> {
        match self.peek_non_ws()? {
            Some(b) if b == byte => {
                self.advance(1);
                Ok(())
            }
            other => Err(DecodeError::Layout(format!(
                "{context}: expected `{}`, found {}",
                byte as char,
                other.map_or("the end of the payload".to_string(), describe_byte)
            ))),
        }
    }

    /// Length of the complete JSON value starting at `start`, reading more
    /// as needed.
    fn value_len(&mut self) -> Result<usize, DecodeError> {
        let mut scanned = Scan::default();
        loop {
            if let Some(len) = scanned.resume(&self.buf[self.start..self.end], self.eof) {
                return Ok(len);
            }
            if !self.fill()? {
                if let Some(len) = scanned.resume(&self.buf[self.start..self.end], true) {
                    return Ok(len);
                }
                return Err(DecodeError::Record {
                    index: self.index,
                    offset: self.consumed,
                    message: "the payload ends inside this record".into(),
                });
            }
        }
    }

    /// Walks down the document to the array at `pointer` and consumes its `[`.
    fn descend(&mut self, pointer: &str) -> Result<(), DecodeError> {
        let segments: Vec<String> = if pointer.is_empty() {
            Vec::new()
        } else if let Some(rest) = pointer.strip_prefix('/') {
            rest.split('/').map(|s| s.replace("~1", "/").replace("~0", "~")).collect()
        } else {
            return Err(DecodeError::Layout(format!(
                "records_pointer {pointer:?} is not an RFC 6901 JSON pointer (it must start with /)"
            )));
        };
        let mut at = String::new();
        for segment in &segments {
            let here = if at.is_empty() { "/".to_string() } else { at.clone() };
            match self.peek_non_ws()? {
                Some(b'{') => self.advance(1),
                other => {
                    return Err(DecodeError::Layout(format!(
                        "records_pointer {pointer:?}: the value at {here} is {}, not an object",
                        other.map_or("missing".into(), describe_value_start)
                    )));
                }
            }
            loop {
                match self.peek_non_ws()? {
                    Some(b'"') => {}
                    Some(b'}') => {
                        return Err(DecodeError::Layout(format!(
                            "records_pointer {pointer:?}: no key {segment:?} in the object at {here}"
                        )));
                    }
                    other => {
                        return Err(DecodeError::Layout(format!(
                            "records_pointer {pointer:?}: invalid JSON in the object at {here}: found {}",
                            other.map_or("the end of the payload".into(), describe_byte)
                        )));
                    }
                }
                let len = self.value_len()?;
                let key_text = std::str::from_utf8(&self.buf[self.start..self.start + len])
                    .map_err(|_| DecodeError::Layout(format!("a key in the object at {here} is not UTF-8")))?
                    .to_string();
                self.advance(len);
                let key = self.key(&key_text)?;
                self.expect(b':', &format!("records_pointer {pointer:?}: object at {here}"))?;
                if key == *segment {
                    break;
                }
                self.peek_non_ws()?;
                let len = self.value_len()?;
                self.advance(len);
                match self.peek_non_ws()? {
                    Some(b',') => self.advance(1),
                    _ => {
                        return Err(DecodeError::Layout(format!(
                            "records_pointer {pointer:?}: no key {segment:?} in the object at {here}"
                        )));
                    }
                }
            }
            at.push('/');
            at.push_str(segment);
        }
        match self.peek_non_ws()? {
            Some(b'[') => {
                self.advance(1);
                Ok(())
            }
            other => {
                let what = other.map_or("missing".into(), describe_value_start);
                Err(DecodeError::Layout(if pointer.is_empty() {
                    format!("the payload is {what}, not an array of records")
                } else {
                    format!("records_pointer {pointer:?} leads to {what}, not an array of records")
                }))
            }
        }
    }

    fn key(&mut self, text: &str) -> Result<String, DecodeError> {
        let syntax = |e: crate::json::SyntaxError| DecodeError::Layout(format!("invalid key {text}: {e}"));
        self.scratch_tape.parse(text).map_err(syntax)?;
        let Some(Tok::Str { start, end, escaped }) = self.scratch_tape.toks.first().copied() else {
            return Err(DecodeError::Layout(format!("invalid key {text}")));
        };
        let mut scratch = String::new();
        Ok(unescape(text, start, end, escaped, &mut scratch).map_err(syntax)?.to_string())
    }

    /// The next record's text, or `None` after the last.
    ///
    /// A record holding bytes that are not UTF-8 inside its strings (a
    /// claim-check object another team wrote) comes with each such byte
    /// `0xNN` as the escape `\udcNN` ([`escape_invalid_utf8`]): a lone
    /// surrogate, for which the record is quarantined alone, naming the
    /// byte, instead of the page failing.
    ///
    /// # Errors
    /// [`DecodeError`] for unreadable bytes, a byte that is not UTF-8
    /// outside a string, a record cut short, or an array that is not closed
    /// properly.
    pub fn next_record(&mut self) -> Result<Option<&str>, DecodeError> {
        let (from, len) = match self.mode {
            Mode::Ndjson => {
                if self.peek_non_ws()?.is_none() {
                    return Ok(None);
                }
                let mut searched = 0;
                let newline = loop {
                    if let Some(at) = memchr::memchr(b'\n', &self.buf[self.start + searched..self.end]) {
                        break searched + at;
                    }
                    searched = self.end - self.start;
                    if !self.fill()? {
                        break self.end - self.start;
                    }
                };
                let from = self.start;
                self.advance(newline);
                (from, newline)
            }
            Mode::Array { done: true, .. } => return Ok(None),
            Mode::Array { first, .. } => {
                let next = self.peek_non_ws()?;
                if next == Some(b']') {
                    self.advance(1);
                    self.mode = Mode::Array { done: true, first: false };
                    self.finish_document()?;
                    return Ok(None);
                }
                if !first {
                    if next != Some(b',') {
                        return Err(DecodeError::Record {
                            index: self.index,
                            offset: self.consumed,
                            message: format!(
                                "expected `,` or `]` between records, found {}",
                                next.map_or("the end of the payload".into(), describe_byte)
                            ),
                        });
                    }
                    self.advance(1);
                    self.peek_non_ws()?;
                }
                let len = self.value_len()?;
                let from = self.start;
                self.advance(len);
                self.mode = Mode::Array { done: false, first: false };
                (from, len)
            }
        };
        let index = self.index;
        self.index += 1;
        let offset = self.consumed - len as u64;
        let bytes = &self.buf[from..from + len];
        // SIMD validation first (every record's bytes are read here); the
        // standard library's only for a record that fails, for its error.
        let valid = simdutf8::basic::from_utf8(bytes).map_err(|_| std::str::from_utf8(bytes));
        let text = match valid {
            Ok(text) => text,
            Err(Ok(text)) => text,
            Err(Err(err)) => {
                let escaped = escape_invalid_utf8(bytes).map_err(|_| DecodeError::Record {
                    index,
                    offset,
                    message: format!("not UTF-8 text ({err}), outside any string"),
                })?;
                self.escaped = escaped.0.into_owned();
                &self.escaped
            }
        };
        let text = text.trim_end_matches(['\r', ' ', '\t']);
        if index == 0 {
            self.seen.first = contracts::digest::fnv1a(text.as_bytes());
        }
        self.seen.last_len = text.len();
        self.seen.last_head.clear();
        self.seen.last_head.extend_from_slice(&text.as_bytes()[..text.len().min(FINGERPRINT_HEAD)]);
        Ok(Some(text))
    }
}

/// Where [`Framer::next_lines`] puts records: their texts in `text` (with
/// the whitespace and newlines between them, which no record slice
/// covers) and, per record, `(start, end, index, payload offset)`, `start`
/// and `end` into `text`.
pub struct Lines<'a> {
    /// The records' bytes, appended.
    pub text: &'a mut String,
    /// One entry per record appended.
    pub records: &'a mut Vec<(usize, usize, u64, u64)>,
    /// Bytes of records (their own, not the whitespace between them) held
    /// so far; the call stops after the record that takes it to `bytes`.
    pub held: &'a mut usize,
}

/// When [`Framer::next_lines`] stops.
#[derive(Clone, Copy, Debug)]
pub struct LinesUntil {
    /// Stop after the record that takes [`Lines::held`] to this many bytes.
    pub bytes: usize,
    /// Stop after the record that makes [`Lines::records`] this long.
    pub records: usize,
    /// Stop before the record of this index ([`Framer::records_read`]
    /// reaching it), leaving it unread.
    pub index: u64,
}

impl<R: Read> Framer<R> {
    /// NDJSON, in bulk: appends the next records to `lines` until one of
    /// `until`'s bounds is reached; `Ok(false)` once the payload holds no
    /// more records. The buffered lines are framed together: one UTF-8
    /// check and one copy for all of them, where [`Framer::next_record`]
    /// checks and hands out each record alone (about 500 instructions a
    /// record, a tenth of the conversion's framing: docs/persist-bench.md).
    /// The records, their indexes, offsets and texts, the fingerprint and
    /// the errors are those of [`Framer::next_record`] called once per
    /// record, which it calls itself for a record that is not whole in the
    /// buffer (longer than it, or the last one without a newline) and for
    /// bytes that are not UTF-8.
    ///
    /// # Errors
    /// As [`Framer::next_record`].
    ///
    /// # Panics
    /// Not in NDJSON mode ([`Framer::lines_are_records`]): a caller's bug.
    pub fn next_lines(&mut self, lines: &mut Lines<'_>, until: LinesUntil) -> Result<bool, DecodeError> {
        assert!(self.lines_are_records(), "next_lines frames NDJSON only");
        loop {
            if *lines.held >= until.bytes || lines.records.len() >= until.records || self.index >= until.index {
                return Ok(true);
            }
            if self.start == self.end && !self.fill()? {
                return Ok(false);
            }
            let avail = &self.buf[self.start..self.end];
            // The records whose line ends in the buffer, relative to it.
            let (base, first_new) = (lines.text.len(), lines.records.len());
            let (mut index, mut held, mut pos) = (self.index, *lines.held, 0);
            for newline in memchr::memchr_iter(b'\n', avail) {
                let line = &avail[pos..newline];
                let lead = line.iter().take_while(|b| matches!(b, b' ' | b'\r' | b'\t')).count();
                let mut end = line.len();
                while end > lead && matches!(line[end - 1], b'\r' | b' ' | b'\t') {
                    end -= 1;
                }
                if end > lead {
                    if index >= until.index {
                        break;
                    }
                    let offset = self.consumed + (pos + lead) as u64;
                    lines.records.push((base + pos + lead, base + pos + end, index, offset));
                    index += 1;
                    held += end - lead;
                }
                pos = newline + 1;
                if held >= until.bytes || lines.records.len() >= until.records {
                    break;
                }
            }
            let framed = &avail[..pos];
            match (lines.records.len() > first_new, simdutf8::basic::from_utf8(framed)) {
                (true, Ok(text)) => {
                    lines.text.push_str(text);
                    let (from, to, _, _) = lines.records[first_new];
                    if self.index == 0 {
                        self.seen.first = contracts::digest::fnv1a(&lines.text.as_bytes()[from..to]);
                    }
                    let (from, to, _, _) = *lines.records.last().unwrap_or(&(from, to, 0, 0));
                    self.seen.last_len = to - from;
                    self.seen.last_head.clear();
                    self.seen
                        .last_head
                        .extend_from_slice(&lines.text.as_bytes()[from..to.min(from + FINGERPRINT_HEAD)]);
                    self.index = index;
                    *lines.held = held;
                    self.advance(pos);
                }
                // Only blank lines: consumed, no record.
                (false, Ok(_)) if pos > 0 => self.advance(pos),
                // No whole record in the buffer, or bytes that are not
                // UTF-8 among them: the next record alone, as ever.
                _ => {
                    lines.records.truncate(first_new);
                    let (index, offset) = (self.index, self.consumed);
                    let Some(text) = self.next_record()? else { return Ok(false) };
                    let from = lines.text.len();
                    lines.text.push_str(text);
                    lines.records.push((from, lines.text.len(), index, offset));
                    *lines.held += lines.text.len() - from;
                }
            }
        }
    }
}

impl<R: Read> Framer<R> {
    /// After the records array: the rest of the enclosing objects, then
    /// only whitespace (data after the document is an error, not ignored).
    fn finish_document(&mut self) -> Result<(), DecodeError> {
        let trailing = |found: Option<u8>, consumed: u64| {
            DecodeError::Layout(format!(
                "unexpected {} at byte {consumed} after the records array; the payload must be one JSON document",
                found.map_or("end of the payload".into(), describe_byte)
            ))
        };
        for _ in 0..self.trailer.enclosing {
            loop {
                match self.peek_non_ws()? {
                    Some(b'}') => {
                        self.advance(1);
                        break;
                    }
                    Some(b',') => {
                        self.advance(1);
                        if self.peek_non_ws()? != Some(b'"') {
                            return Err(trailing(self.peek_non_ws()?, self.consumed));
                        }
                        let len = self.value_len()?;
                        self.advance(len);
                        self.expect(b':', "after the records array")?;
                        self.peek_non_ws()?;
                        let len = self.value_len()?;
                        self.advance(len);
                    }
                    other => return Err(trailing(other, self.consumed)),
                }
            }
        }
        match self.peek_non_ws()? {
            None => Ok(()),
            other => Err(trailing(other, self.consumed)),
        }
    }
}

fn describe_byte(b: u8) -> String {
    if b.is_ascii_graphic() { format!("`{}`", b as char) } else { format!("byte 0x{b:02x}") }
}

fn describe_value_start(b: u8) -> String {
    match b {
        b'{' => "an object".into(),
        b'[' => "an array".into(),
        b'"' => "a string".into(),
        b'-' | b'0'..=b'9' => "a number".into(),
        b't' | b'f' => "a boolean".into(),
        b'n' => "null".into(),
        other => describe_byte(other),
    }
}

/// A resumable scan for the end of one JSON value: tracks nesting and
/// strings only (the tokenizer checks the rest).
#[derive(Default)]
struct Scan {
    pos: usize,
    depth: usize,
    in_string: bool,
    escape: bool,
    started: bool,
    scalar: bool,
}

impl Scan {
    /// The value's length once it is complete within `bytes`.
    fn resume(&mut self, bytes: &[u8], eof: bool) -> Option<usize> {
        while self.pos < bytes.len() {
            let b = bytes[self.pos];
            if self.in_string {
                if self.escape {
                    self.escape = false;
                    self.pos += 1;
                    continue;
                }
                // Jump to the next quote, backslash or control character
                // (which the tokenizer refuses later; here it is skipped).
                self.pos = crate::json::string_run_end(bytes, self.pos);
                match bytes.get(self.pos) {
                    None => break,
                    Some(b'\\') => self.escape = true,
                    Some(b'"') => {
                        self.in_string = false;
                        if self.depth == 0 {
                            return Some(self.pos + 1);
                        }
                    }
                    Some(_) => {}
                }
                self.pos += 1;
                continue;
            }
            if !self.started {
                self.started = true;
                self.scalar = !matches!(b, b'{' | b'[' | b'"');
            }
            if self.scalar {
                if matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t') {
                    return Some(self.pos);
                }
                self.pos += 1;
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(self.pos + 1);
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        (eof && self.scalar && self.pos > 0).then_some(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn records(bytes: &[u8], format: &PayloadFormat) -> Result<Vec<String>, DecodeError> {
        let mut framer = Framer::open(&PageSource::Bytes(Bytes::copy_from_slice(bytes)), format, u64::MAX)?;
        let mut out = Vec::new();
        while let Some(text) = framer.next_record()? {
            out.push(text.to_string());
        }
        Ok(out)
    }

    fn auto() -> PayloadFormat {
        PayloadFormat::default()
    }

    fn pointer(p: &str) -> PayloadFormat {
        PayloadFormat { records_pointer: Some(p.into()), ..PayloadFormat::default() }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).expect("gzip");
        encoder.finish().expect("gzip")
    }

    /// Every record `next_lines` frames, with its index, and the
    /// fingerprint, in calls bounded by `until` (index bound aside).
    /// Each record's text and index, and the page's fingerprint.
    type Framed = (Vec<(String, u64)>, Option<String>);

    fn in_bulk(bytes: &[u8], until: LinesUntil) -> Result<Framed, DecodeError> {
        let mut framer = Framer::open(&PageSource::Bytes(Bytes::copy_from_slice(bytes)), &auto(), u64::MAX)?;
        let mut out = Vec::new();
        loop {
            let (mut text, mut records, mut held) = (String::new(), Vec::new(), 0);
            let mut lines = Lines { text: &mut text, records: &mut records, held: &mut held };
            let more = framer.next_lines(&mut lines, until)?;
            assert!(records.len() <= until.records, "at most the records asked for");
            assert_eq!(held, records.iter().map(|(from, to, _, _)| to - from).sum::<usize>(), "held");
            out.extend(records.iter().map(|&(from, to, index, _)| (text[from..to].to_string(), index)));
            if !more {
                return Ok((out, framer.fingerprint()));
            }
        }
    }

    /// `next_lines` frames the records `next_record` does, one by one:
    /// blank lines, `\r\n`, spaces and tabs around records, bytes that are
    /// not UTF-8 inside a string (escaped, by the record-by-record path),
    /// a line longer than the read buffer, a last line without a newline,
    /// a byte-order mark; in calls bounded by bytes and by records.
    #[test]
    fn lines_framed_in_bulk_are_the_records_framed_one_by_one() {
        let long = format!("{{\"big\": \"{}\"}}", "x".repeat(CHUNK_BYTES * 2 + 17));
        let mut page: Vec<u8> = b"\xEF\xBB\xBF  {\"a\": 1}\r\n\n\t{\"b\": [1, 2]} \t\n".to_vec();
        for i in 0..3000 {
            page.extend_from_slice(format!("{{\"id\": {i}, \"name\": \"n{i}\"}}\n").as_bytes());
            if i % 700 == 3 {
                page.extend_from_slice(b"\n   \n");
            }
            if i == 1500 {
                page.extend_from_slice(b"{\"bad\": \"\xff\xfe\"}\n");
                page.extend_from_slice(long.as_bytes());
                page.push(b'\n');
            }
        }
        page.extend_from_slice(b"{\"last\": true}");
        let one_by_one: Vec<String> = records(&page, &auto()).expect("records");
        let mut framer =
            Framer::open(&PageSource::Bytes(Bytes::copy_from_slice(&page)), &auto(), u64::MAX).expect("open");
        while framer.next_record().expect("record").is_some() {}
        let fingerprint = framer.fingerprint();
        assert_eq!(one_by_one.len(), 3005);
        for until in [
            LinesUntil { bytes: usize::MAX, records: usize::MAX, index: u64::MAX },
            LinesUntil { bytes: 1000, records: usize::MAX, index: u64::MAX },
            LinesUntil { bytes: usize::MAX, records: 7, index: u64::MAX },
            LinesUntil { bytes: 1, records: 1, index: u64::MAX },
        ] {
            let (bulk, bulk_fingerprint) = in_bulk(&page, until).expect("in bulk");
            let texts: Vec<&String> = bulk.iter().map(|(text, _)| text).collect();
            assert_eq!(texts, one_by_one.iter().collect::<Vec<_>>(), "{until:?}");
            assert!(bulk.iter().enumerate().all(|(i, (_, index))| *index == i as u64), "{until:?}: indexes in order");
            assert_eq!(bulk_fingerprint, fingerprint, "{until:?}");
        }
        // Bounded by index: the record of that index is left unread.
        let mut framer =
            Framer::open(&PageSource::Bytes(Bytes::copy_from_slice(&page)), &auto(), u64::MAX).expect("open");
        let (mut text, mut records, mut held) = (String::new(), Vec::new(), 0);
        let until = LinesUntil { bytes: usize::MAX, records: usize::MAX, index: 10 };
        assert!(
            framer
                .next_lines(&mut Lines { text: &mut text, records: &mut records, held: &mut held }, until)
                .expect("ten")
        );
        assert_eq!(records.len(), 10);
        assert_eq!(framer.next_record().expect("the 11th").map(str::to_string), Some(one_by_one[10].clone()));
    }

    #[test]
    fn every_layout_yields_the_same_records() {
        let expected = vec![r#"{"a":1}"#.to_string(), r#"{"b":"x,]}"}"#.to_string(), "7".to_string()];
        let array = br#"[{"a":1}, {"b":"x,]}"} ,7]"#;
        assert_eq!(records(array, &auto()).expect("array"), expected);
        let ndjson = b"{\"a\":1}\r\n\n{\"b\":\"x,]}\"}\n7";
        assert_eq!(records(ndjson, &auto()).expect("ndjson"), expected);
        let wrapped = br#"{"meta": {"n": [1, {"x": "]"}]}, "da\/ta": {"items": [{"a":1},{"b":"x,]}"},7], "after": 1}}"#;
        assert_eq!(records(wrapped, &pointer("/da~1ta/items")).expect("pointer"), expected);
        let mut bom = vec![0xEF, 0xBB, 0xBF];
        bom.extend_from_slice(array);
        assert_eq!(records(&gzip(&bom), &auto()).expect("gzip + BOM"), expected);
        assert_eq!(records(b"", &auto()).expect("empty"), Vec::<String>::new());
        assert_eq!(records(b"[ ]", &auto()).expect("empty array"), Vec::<String>::new());
    }

    #[test]
    fn records_larger_than_a_chunk_are_framed_whole() {
        let big = format!("{{\"s\":\"{}\"}}", "x".repeat(CHUNK_BYTES * 3));
        let array = format!("[{big},{big}]");
        assert_eq!(records(array.as_bytes(), &auto()).expect("array"), vec![big.clone(), big.clone()]);
        let ndjson = format!("{big}\n{big}\n");
        assert_eq!(records(ndjson.as_bytes(), &auto()).expect("ndjson"), vec![big.clone(), big]);
    }

    /// A reader that counts the bytes taken from it.
    struct Counting<R> {
        inner: R,
        taken: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.taken.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(n)
        }
    }

    #[test]
    fn a_payload_past_the_bound_fails_having_read_one_byte_past_it() {
        const LIMIT: u64 = 1 << 20;
        // One string that never ends: without the bound the framer would
        // buffer it until memory runs out.
        let endless = std::io::Cursor::new(b"[{\"s\": \"".to_vec()).chain(std::io::repeat(b'x'));
        let taken = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let reader = Counting { inner: endless, taken: taken.clone() };
        let mut framer = Framer::new(reader, &auto(), LIMIT).expect("the array opens");
        let err = framer.next_record().expect_err("past the bound");
        assert!(matches!(err, DecodeError::TooLarge { limit: LIMIT }), "{err}");
        assert!(err.to_string().contains("more than 1048576 bytes") && err.to_string().contains("MAX_PAGE_BYTES"));
        assert_eq!(taken.load(std::sync::atomic::Ordering::Relaxed), LIMIT + 1, "one byte past the bound, no more");
        // At the bound exactly, the payload is read whole.
        let text = br#"[{"a": 1}, {"a": 2}]"#;
        let mut framer = Framer::new(&text[..], &auto(), text.len() as u64).expect("opens");
        assert_eq!(framer.next_record().expect("first"), Some(r#"{"a": 1}"#));
        assert_eq!(framer.next_record().expect("second"), Some(r#"{"a": 2}"#));
        assert_eq!(framer.next_record().expect("end"), None);
    }

    #[test]
    fn bad_payloads_say_what_is_wrong() {
        let err = records(br#"{"data": {"items": 3}}"#, &pointer("/data/items")).expect_err("not array");
        assert!(err.to_string().contains("leads to a number, not an array"), "{err}");
        let err = records(br#"{"data": {}}"#, &pointer("/data/items")).expect_err("missing");
        assert!(err.to_string().contains("no key \"items\" in the object at /data"), "{err}");
        let err = records(b"[{\"a\":1} {\"b\":2}]", &auto()).expect_err("missing comma");
        assert!(err.to_string().contains("record 1") && err.to_string().contains("expected `,` or `]`"), "{err}");
        let err = records(b"[{\"a\":1}, {\"b\":", &auto()).expect_err("cut short");
        assert!(err.to_string().contains("ends inside this record"), "{err}");
        let mut cut = gzip(br#"[{"a":1},{"b":2},{"c":3}]"#);
        cut.truncate(cut.len() - 12);
        let err = records(&cut, &auto()).expect_err("cut gzip");
        assert!(err.to_string().contains("gzip stream is cut short"), "{err}");
        // Only the trailer (CRC and size) missing: the records decode, and
        // the stream is still refused, as an array and as NDJSON.
        let many: Vec<String> = (0..5000).map(|i| format!("{{\"i\":{i}}}")).collect();
        for text in [format!("[{}]", many.join(",")), many.join("\n")] {
            let mut cut = gzip(text.as_bytes());
            cut.truncate(cut.len() - 4);
            let err = records(&cut, &auto()).expect_err("trailer missing");
            assert!(err.to_string().contains("gzip stream is cut short"), "{err}");
        }
        let err = records(b"<html>", &auto()).expect_err("html");
        assert!(err.to_string().contains("starts with `<`"), "{err}");
        // A byte that is not UTF-8 in a string reads as its `\udcNN`
        // escape (the record is then quarantined alone); outside any string
        // it is refused.
        assert_eq!(records(b"{\"a\":\"\xff\"}\n", &auto()).expect("latin-1 in a string"), [r#"{"a":"\udcff"}"#]);
        let err = records(b"{\"a\":1\xff}\n", &auto()).expect_err("latin-1 outside a string");
        assert!(err.to_string().contains("not UTF-8") && err.to_string().contains("outside any string"), "{err}");
        let format = PayloadFormat { layout: Layout::Ndjson, records_pointer: Some("/x".into()) };
        assert!(records(b"{}", &format).is_err());
        for trailing in [&br#"[{"a":1}][{"a":2}]"#[..], br#"[{"a":1}] garbage"#] {
            let err = records(trailing, &auto()).expect_err("data after the array");
            assert!(err.to_string().contains("after the records array"), "{err}");
        }
        let err = records(br#"{"data": [{"a":1}]} {"more": 1}"#, &pointer("/data")).expect_err("second document");
        assert!(err.to_string().contains("after the records array"), "{err}");
        let err = records(br#"{"data": [{"a":1}], "x" 1}"#, &pointer("/data")).expect_err("broken wrapper");
        assert!(err.to_string().contains("expected `:`"), "{err}");
    }
}
