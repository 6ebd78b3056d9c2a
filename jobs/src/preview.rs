//! A payload shown safely in a terminal or a web page: printable, escaped,
//! truncated.

/// `payload` as text of at most `max` characters (then `…`): printable
/// characters of valid UTF-8 as they are, `\n`, `\t`, `\\` and every other
/// byte or control character escaped (`\xNN`, `\u{NNNN}`), so no terminal
/// escape sequence passes through.
///
/// ```
/// use delayq_jobs::preview::preview;
/// assert_eq!(preview(b"hi\x1b[31m\n\xff", 80), "hi\\x1b[31m\\n\\xff");
/// assert_eq!(preview(b"abcdef", 3), "abc…");
/// ```
pub fn preview(payload: &[u8], max: usize) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for chunk in payload.utf8_chunks() {
        for c in chunk.valid().chars() {
            if shown >= max {
                out.push('…');
                return out;
            }
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x80 && c.is_ascii_control() => {
                    out.push_str(&format!("\\x{:02x}", c as u32))
                }
                c if c.is_control() || is_invisible(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
                c => out.push(c),
            }
            shown += 1;
        }
        for b in chunk.invalid() {
            if shown >= max {
                out.push('…');
                return out;
            }
            out.push_str(&format!("\\x{b:02x}"));
            shown += 1;
        }
    }
    out
}

/// Format characters that reorder or hide text (bidi overrides, zero-width).
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// A single line of text (a kind, an error) safe to print: as [`preview`].
pub fn line(text: &str, max: usize) -> String {
    preview(text.as_bytes(), max)
}
