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
/// assert_eq!(preview("a\u{2028}b\u{ad}c".as_bytes(), 80), "a\\u{2028}b\\u{00ad}c");
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

/// Characters that reorder, hide or break text without showing: Unicode's
/// format characters (bidi marks and overrides, zero-width and joiner
/// characters, the soft hyphen, the Arabic letter mark, word joiner and
/// invisible operators, tag characters), the line and paragraph
/// separators, and the blank fillers a name can hide behind.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{061c}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e007f}'
            | '\u{e0100}'..='\u{e01ef}'
    ) || matches!(c as u32, 0x0600..=0x0605 | 0x06dd | 0x070f | 0x0890 | 0x0891 | 0x08e2 | 0x110bd | 0x110cd)
}

/// A single line of text (a kind, an error) safe to print: as [`preview`].
pub fn line(text: &str, max: usize) -> String {
    preview(text.as_bytes(), max)
}
