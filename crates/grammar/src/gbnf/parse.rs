//! GBNF text to [`Ast`]: a lexer and an iterative (explicit-stack) parser.
//!
//! The lexer turns the whole source into [`Lexeme`]s (rule names, `::=`, literals, classes,
//! `.`, token references, `( ) |` and repetition operators), skipping whitespace, newlines
//! and `#` comments. The parser then reads rules: `name ::=` followed by a body that runs
//! until the next `name ::=` or the end of the text. Newlines are not significant, so the
//! parser accepts every grammar llama.cpp accepts (where a rule ends at a newline outside
//! parentheses) and also lets a rule continue on the next line (`| ...` continuations).
//!
//! Nothing here recurses: groups are kept on an explicit stack whose height is checked
//! against [`Limits::max_nesting`] before each `(` is pushed, so 100,000 nested `(` fail
//! with a limit error instead of overflowing the call stack. Repetition operators stacked
//! on one element (`"a"*?`) count as nesting too. Time and memory are linear in the source.

use super::ast::{Ast, ClassItem, Node, NodeKind, RepeatOp, RuleDef};
use super::error::{GbnfError, GbnfErrorKind, Span};
use crate::{Limits, TokenRef};
use formwork_vocab::TokenId;

/// A lexical token of GBNF.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Name(String),
    Define,
    Literal(String),
    Class { negated: bool, items: Vec<ClassItem> },
    Dot,
    Token(TokenRef),
    NotToken(TokenRef),
    LParen,
    RParen,
    Pipe,
    Repeat(RepeatOp),
    Eof,
}

#[derive(Clone, Debug)]
struct Lexeme {
    tok: Tok,
    span: Span,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Name(n) => format!("rule name `{n}`"),
        Tok::Define => "`::=`".into(),
        Tok::Literal(_) => "a string literal".into(),
        Tok::Class { .. } => "a character class".into(),
        Tok::Dot => "`.`".into(),
        Tok::Token(_) => "a token reference".into(),
        Tok::NotToken(_) => "a negated token reference".into(),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::Pipe => "`|`".into(),
        Tok::Repeat(_) => "a repetition operator".into(),
        Tok::Eof => "the end of the grammar".into(),
    }
}

/// True for the characters of a rule name: llama.cpp's `[A-Za-z0-9-]`, plus `_`.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    limits: &'a Limits,
}

impl<'a> Lexer<'a> {
    fn err(&self, kind: GbnfErrorKind, span: Span) -> GbnfError {
        GbnfError::new(kind, span, self.src)
    }

    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut it = self.src[self.pos..].chars();
        it.next();
        it.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            if c == '#' {
                match self.src[self.pos..].find('\n') {
                    Some(i) => self.pos += i + 1,
                    None => self.pos = self.src.len(),
                }
            } else if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }

    fn all(mut self) -> Result<Vec<Lexeme>, GbnfError> {
        let mut out = Vec::new();
        loop {
            self.skip_space();
            let start = self.pos;
            let Some(c) = self.peek() else {
                out.push(Lexeme { tok: Tok::Eof, span: Span::point(start) });
                return Ok(out);
            };
            let tok = match c {
                '"' => self.literal()?,
                '[' => self.class()?,
                '<' => Tok::Token(self.token()?),
                '{' => self.braces()?,
                '.' => self.single(Tok::Dot),
                '(' => self.single(Tok::LParen),
                ')' => self.single(Tok::RParen),
                '|' => self.single(Tok::Pipe),
                '*' => self.single(Tok::Repeat(RepeatOp::Star)),
                '+' => self.single(Tok::Repeat(RepeatOp::Plus)),
                '?' => self.single(Tok::Repeat(RepeatOp::Question)),
                ':' if self.src[start..].starts_with("::=") => {
                    self.pos += 3;
                    Tok::Define
                }
                '!' if self.peek2() == Some('<') => {
                    self.pos += 1;
                    Tok::NotToken(self.token()?)
                }
                c if is_name_char(c) => {
                    let len = self.src[start..].find(|c| !is_name_char(c)).unwrap_or(self.src.len() - start);
                    self.pos += len;
                    Tok::Name(self.src[start..self.pos].to_string())
                }
                c => return Err(self.err(GbnfErrorKind::UnexpectedChar(c), Span::new(start, start + c.len_utf8()))),
            };
            out.push(Lexeme { tok, span: Span::new(start, self.pos) });
        }
    }

    fn single(&mut self, t: Tok) -> Tok {
        self.pos += 1;
        t
    }

    /// One character of a literal or class, after any escape is decoded. `open` is the
    /// span reported if the text ends here.
    fn char_or_escape(&mut self, unterminated: &GbnfErrorKind, open: Span) -> Result<char, GbnfError> {
        let start = self.pos;
        let Some(c) = self.bump() else { return Err(self.err(unterminated.clone(), open)) };
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.bump() else { return Err(self.err(unterminated.clone(), open)) };
        let digits = match e {
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            't' => return Ok('\t'),
            '\\' | '"' | '\'' | '[' | ']' | '-' | '^' | '/' => return Ok(e),
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => {
                return Err(self.err(
                    GbnfErrorKind::BadEscape(format!("\\{e}")),
                    Span::new(start, self.pos),
                ))
            }
        };
        let rest = &self.src[self.pos..];
        let hex: String = rest.chars().take(digits).take_while(|c| c.is_ascii_hexdigit()).collect();
        self.pos += hex.len();
        let bad = |s: &Self| {
            s.err(GbnfErrorKind::BadEscape(s.src[start..s.pos].to_string()), Span::new(start, s.pos))
        };
        if hex.len() != digits {
            return Err(bad(self));
        }
        let v = u32::from_str_radix(&hex, 16).map_err(|_| bad(self))?;
        char::from_u32(v).ok_or_else(|| bad(self))
    }

    fn literal(&mut self) -> Result<Tok, GbnfError> {
        let open = Span::new(self.pos, self.pos + 1);
        self.pos += 1;
        let mut s = String::new();
        loop {
            if self.peek() == Some('"') {
                self.pos += 1;
                return Ok(Tok::Literal(s));
            }
            s.push(self.char_or_escape(&GbnfErrorKind::UnterminatedString, open)?);
        }
    }

    fn class(&mut self) -> Result<Tok, GbnfError> {
        let open = Span::new(self.pos, self.pos + 1);
        self.pos += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut items = Vec::new();
        let unterminated = GbnfErrorKind::UnterminatedClass;
        loop {
            match self.peek() {
                None => return Err(self.err(unterminated, open)),
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {}
            }
            let start = self.pos;
            let lo = self.char_or_escape(&unterminated, open)?;
            let mut hi = lo;
            if self.peek() == Some('-') && !matches!(self.peek2(), Some(']') | None) {
                self.pos += 1;
                hi = self.char_or_escape(&unterminated, open)?;
                if hi < lo {
                    return Err(self.err(GbnfErrorKind::BadClassRange { lo, hi }, Span::new(start, self.pos)));
                }
            }
            items.push(ClassItem { lo, hi, span: Span::new(start, self.pos) });
        }
        if items.is_empty() {
            return Err(self.err(GbnfErrorKind::EmptyClass, Span::new(open.start, self.pos)));
        }
        Ok(Tok::Class { negated, items })
    }

    /// A token reference `<[123]>` or `<name>`, from its `<`.
    fn token(&mut self) -> Result<TokenRef, GbnfError> {
        let start = self.pos;
        let rest = &self.src[start..];
        let end = rest.find(|c: char| c == '>' || c.is_whitespace()).filter(|&i| rest.as_bytes()[i] == b'>');
        let Some(end) = end else {
            return Err(self.err(
                GbnfErrorKind::BadToken("missing `>`: write `<[123]>` or `<|name|>`".into()),
                Span::new(start, start + 1),
            ));
        };
        let text = &rest[..=end];
        self.pos = start + end + 1;
        let span = Span::new(start, self.pos);
        if let Some(inner) = text.strip_prefix("<[").and_then(|t| t.strip_suffix("]>")) {
            let id: u32 = inner.parse().map_err(|_| {
                self.err(GbnfErrorKind::BadToken(format!("`{text}` is not a token id (a decimal u32)")), span)
            })?;
            return Ok(TokenRef::Id(TokenId(id)));
        }
        if text.len() <= 2 {
            return Err(self.err(GbnfErrorKind::BadToken("empty token name `<>`".into()), span));
        }
        Ok(TokenRef::Name(text.to_string()))
    }

    fn braces(&mut self) -> Result<Tok, GbnfError> {
        let start = self.pos;
        let Some(len) = self.src[start..].find('}') else {
            return Err(self.err(GbnfErrorKind::BadRepetition, Span::new(start, start + 1)));
        };
        self.pos = start + len + 1;
        let span = Span::new(start, self.pos);
        let inner = &self.src[start + 1..start + len];
        let bad = || GbnfError::new(GbnfErrorKind::BadRepetition, span, self.src);
        let num = |s: &str| -> Result<Option<u64>, GbnfError> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            if !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // Saturate: any count this large is over the limit anyway.
            Ok(Some(s.parse::<u64>().unwrap_or(u64::MAX)))
        };
        let (min, max) = match inner.split_once(',') {
            None => {
                let n = num(inner)?.ok_or_else(bad)?;
                (n, Some(n))
            }
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a.is_none() && b.is_none() {
                    return Err(bad());
                }
                (a.unwrap_or(0), b)
            }
        };
        let lim = self.limits.max_repeat;
        for n in [Some(min), max].into_iter().flatten() {
            if n > lim as u64 {
                return Err(self.err(GbnfErrorKind::RepeatTooLarge { count: n, max: lim }, span));
            }
        }
        let (min, max) = (min as u32, max.map(|m| m as u32));
        if let Some(m) = max {
            if m < min {
                return Err(self.err(GbnfErrorKind::RepeatMinAboveMax { min, max: m }, span));
            }
        }
        Ok(Tok::Repeat(RepeatOp::Range { min, max }))
    }
}

/// A group being parsed: finished branches, and the sequence of the current branch with
/// each item's nesting height.
struct Frame {
    open: Span,
    branches: Vec<(Node, usize)>,
    seq: Vec<(Node, usize)>,
    seq_start: usize,
}

impl Frame {
    fn new(open: Span, at: usize) -> Frame {
        Frame { open, branches: Vec::new(), seq: Vec::new(), seq_start: at }
    }

    fn end_branch(&mut self, at: usize) {
        let seq = std::mem::take(&mut self.seq);
        let item = if seq.len() == 1 {
            seq.into_iter().next().unwrap()
        } else {
            let h = seq.iter().map(|(_, h)| *h).max().unwrap_or(0);
            let span = match (seq.first(), seq.last()) {
                (Some(a), Some(b)) => a.0.span.to(b.0.span),
                _ => Span::point(self.seq_start.min(at)),
            };
            (Node { kind: NodeKind::Seq(seq.into_iter().map(|(n, _)| n).collect()), span }, h)
        };
        self.branches.push(item);
    }

    /// Closes the last branch and returns the frame's content with its height.
    fn finish(mut self, at: usize) -> (Node, usize) {
        self.end_branch(at);
        if self.branches.len() == 1 {
            return self.branches.pop().unwrap();
        }
        let h = self.branches.iter().map(|(_, h)| *h).max().unwrap_or(0);
        let span = self.branches[0].0.span.to(self.branches.last().unwrap().0.span);
        (Node { kind: NodeKind::Alt(self.branches.into_iter().map(|(n, _)| n).collect()), span }, h)
    }
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Lexeme>,
    i: usize,
    limits: &'a Limits,
    elements: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, kind: GbnfErrorKind, span: Span) -> GbnfError {
        GbnfError::new(kind, span, self.src)
    }

    fn count_element(&mut self, span: Span) -> Result<(), GbnfError> {
        self.elements += 1;
        if self.elements > self.limits.max_elements {
            return Err(self.err(GbnfErrorKind::TooManyElements { max: self.limits.max_elements }, span));
        }
        Ok(())
    }

    fn at_rule_start(&self) -> bool {
        matches!(self.toks[self.i].tok, Tok::Name(_)) && matches!(self.toks.get(self.i + 1), Some(Lexeme { tok: Tok::Define, .. }))
    }

    fn rules(mut self) -> Result<Ast, GbnfError> {
        let mut rules = Vec::new();
        loop {
            let lx = &self.toks[self.i];
            match &lx.tok {
                Tok::Eof => break,
                Tok::Name(n) => {
                    let (name, name_span) = (n.clone(), lx.span);
                    let next = &self.toks[self.i + 1];
                    if next.tok != Tok::Define {
                        return Err(self.err(GbnfErrorKind::ExpectedDefine(describe(&next.tok)), next.span));
                    }
                    if rules.len() >= self.limits.max_rules {
                        return Err(self.err(GbnfErrorKind::TooManyRules { max: self.limits.max_rules }, name_span));
                    }
                    self.i += 2;
                    let body = self.body()?;
                    rules.push(RuleDef { name, name_span, body });
                }
                t => return Err(self.err(GbnfErrorKind::ExpectedRule(describe(t)), lx.span)),
            }
        }
        Ok(Ast { rules })
    }

    /// A rule body: alternatives up to the next `name ::=` or the end of the text.
    fn body(&mut self) -> Result<Node, GbnfError> {
        let max_nesting = self.limits.max_nesting;
        let start = self.toks[self.i].span.start;
        let mut stack: Vec<Frame> = vec![Frame::new(Span::point(start), start)];
        loop {
            if self.at_rule_start() || self.toks[self.i].tok == Tok::Eof {
                let at = self.toks[self.i].span.start;
                if stack.len() > 1 {
                    let open = stack.last().unwrap().open;
                    return Err(self.err(GbnfErrorKind::UnclosedGroup, open));
                }
                let (node, _) = stack.pop().unwrap().finish(at);
                return Ok(node);
            }
            let Lexeme { tok, span } = self.toks[self.i].clone();
            self.i += 1;
            let top = stack.last_mut().unwrap();
            let atom = match tok {
                Tok::Literal(s) => NodeKind::Literal(s),
                Tok::Class { negated, items } => NodeKind::Class { negated, items },
                Tok::Dot => NodeKind::Any,
                Tok::Name(n) => NodeKind::RuleRef(n),
                Tok::Token(t) => NodeKind::Token(t),
                Tok::NotToken(t) => NodeKind::NotToken(t),
                Tok::Pipe => {
                    top.end_branch(span.start);
                    top.seq_start = span.end;
                    continue;
                }
                Tok::LParen => {
                    if stack.len() > max_nesting {
                        return Err(self.err(GbnfErrorKind::NestingTooDeep { max: max_nesting }, span));
                    }
                    stack.push(Frame::new(span, span.end));
                    continue;
                }
                Tok::RParen => {
                    if stack.len() == 1 {
                        return Err(self.err(GbnfErrorKind::UnmatchedCloseParen, span));
                    }
                    let frame = stack.pop().unwrap();
                    let gspan = frame.open.to(span);
                    let (inner, h) = frame.finish(span.start);
                    self.count_element(gspan)?;
                    let node = Node { kind: NodeKind::Group(Box::new(inner)), span: gspan };
                    stack.last_mut().unwrap().seq.push((node, h + 1));
                    continue;
                }
                Tok::Repeat(op) => {
                    let c = self.src[span.start..].chars().next().unwrap_or('*');
                    let Some((last, h)) = top.seq.pop() else {
                        return Err(self.err(GbnfErrorKind::NothingToRepeat(c), span));
                    };
                    if h + 1 > max_nesting {
                        return Err(self.err(GbnfErrorKind::NestingTooDeep { max: max_nesting }, span));
                    }
                    let rspan = last.span.to(span);
                    let node = Node { kind: NodeKind::Repeat { node: Box::new(last), op }, span: rspan };
                    stack.last_mut().unwrap().seq.push((node, h + 1));
                    self.count_element(rspan)?;
                    continue;
                }
                Tok::Define => return Err(self.err(GbnfErrorKind::ExpectedRule(describe(&Tok::Define)), span)),
                Tok::Eof => unreachable!("handled above"),
            };
            top.seq.push((Node { kind: atom, span }, 0));
            self.count_element(span)?;
        }
    }
}

/// Parses GBNF text into an [`Ast`], checking syntax and the limits.
pub(crate) fn parse_ast(src: &str, limits: &Limits) -> Result<Ast, GbnfError> {
    if src.len() > limits.max_source_bytes {
        return Err(GbnfError::new(
            GbnfErrorKind::SourceTooLarge { len: src.len(), max: limits.max_source_bytes },
            Span::point(0),
            "",
        ));
    }
    let toks = Lexer { src, pos: 0, limits }.all()?;
    Parser { src, toks, i: 0, limits, elements: 0 }.rules()
}
