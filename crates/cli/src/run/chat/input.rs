//! What the user types in `formwork run`'s chat, before anything runs: slash commands parsed
//! into [`Command`]s, and `"""` multi-line input gathered by [`MultiLine`]. No I/O here.
//!
//! ```text
//! >>> /set parameter temperature 0     a command
//! >>> """                               opens a multi-line message (or command)...
//! ... first line
//! ... second line"""                    ...closed by a line that ends with """
//! ```

use std::fmt;
use std::path::PathBuf;

/// The help printed by `/?` and `/help`.
pub const HELP: &str = "\
Available commands:
  /set format json          answer with a JSON object
  /set format FILE          answer with JSON valid against the JSON Schema in FILE
  /set noformat             answer with free text
  /set system TEXT          set the system message (`/set system` alone removes it)
  /set parameter NAME VALUE set a sampling parameter; NAME is one of
                            temperature, top_k, top_p, min_p, repeat_penalty,
                            repeat_last_n, seed, num_predict (-1: no limit),
                            num_ctx, stop (one or more stop strings)
  /set think                reason before answering (reasoning models)
  /set nothink              answer without reasoning
  /show                     the model, parameters, system message and format
  /clear                    forget the conversation (settings are kept)
  /bye                      leave (as do Ctrl-D, and Ctrl-C at an empty prompt)
  /?, /help                 this help

Ctrl-C while an answer streams stops that answer (what was generated is kept).
Use \"\"\" to begin and end a message of several lines.";

/// A slash command.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `/set format json`: any JSON object.
    FormatJson,
    /// `/set format FILE`: JSON valid against the JSON Schema in FILE.
    FormatSchema(PathBuf),
    /// `/set noformat`: free text.
    NoFormat,
    /// `/set system TEXT`; `None` removes the system message.
    System(Option<String>),
    /// `/set parameter NAME VALUE`.
    Parameter(Parameter),
    /// `/set think` (true) or `/set nothink` (false).
    Think(bool),
    /// `/show`.
    Show,
    /// `/clear`.
    Clear,
    /// `/bye`.
    Bye,
    /// `/?` or `/help`.
    Help,
}

/// A sampling parameter and its new value, parsed but not yet checked against the others
/// (the session applies it and validates the sampler as a whole).
#[derive(Clone, Debug, PartialEq)]
pub enum Parameter {
    /// `temperature` (0 = greedy).
    Temperature(f32),
    /// `top_k` (0 = no limit).
    TopK(usize),
    /// `top_p` (1 = off).
    TopP(f32),
    /// `min_p` (0 = off).
    MinP(f32),
    /// `repeat_penalty` (1 = off).
    RepeatPenalty(f32),
    /// `repeat_last_n` (0 = off).
    RepeatLastN(usize),
    /// `seed`.
    Seed(u64),
    /// `num_predict`: most tokens per answer (`None`, given as -1: no limit).
    NumPredict(Option<usize>),
    /// `num_ctx`: context length to use, at most the one the model was loaded with.
    NumCtx(usize),
    /// `stop`: the stop strings (replacing the previous ones).
    Stop(Vec<String>),
}

/// The names `/set parameter` takes, in the order `/show` lists them.
pub const PARAMETER_NAMES: &[&str] =
    &["temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "seed", "num_predict", "num_ctx", "stop"];

/// A line that is not a valid command: the message says what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandError(String);

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CommandError {}

fn error(msg: impl Into<String>) -> CommandError {
    CommandError(msg.into())
}

/// One complete input: a message for the model, or a command.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Text to send (never blank).
    Message(String),
    /// A slash command.
    Command(Command),
}

/// Classifies one complete input (after [`MultiLine`]): `None` for a blank one.
pub fn parse_input(text: &str) -> Option<Result<Input, CommandError>> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return None;
    }
    if trimmed.starts_with('/') {
        return Some(parse_command(trimmed).map(Input::Command));
    }
    Some(Ok(Input::Message(text.to_string())))
}

/// Parses a line that starts with `/`.
pub fn parse_command(line: &str) -> Result<Command, CommandError> {
    let line = line.trim();
    let (word, rest) = split_word(line);
    match word {
        "/bye" | "/exit" => no_argument(word, rest, Command::Bye),
        "/?" | "/help" => no_argument(word, rest, Command::Help),
        "/clear" => no_argument(word, rest, Command::Clear),
        "/show" => no_argument(word, rest, Command::Show),
        "/set" => parse_set(rest),
        _ => Err(error(format!("unknown command `{word}`; type /? for the list"))),
    }
}

fn no_argument(word: &str, rest: &str, c: Command) -> Result<Command, CommandError> {
    if rest.is_empty() {
        Ok(c)
    } else {
        Err(error(format!("{word} takes no argument (got `{rest}`)")))
    }
}

/// The first whitespace-separated word and the rest, trimmed.
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, ""),
    }
}

fn parse_set(rest: &str) -> Result<Command, CommandError> {
    let (what, value) = split_word(rest);
    match what {
        "format" => match value {
            "" => Err(error("/set format takes `json` or a JSON Schema file")),
            "json" => Ok(Command::FormatJson),
            path => Ok(Command::FormatSchema(PathBuf::from(path))),
        },
        "noformat" => no_argument("/set noformat", value, Command::NoFormat),
        // The text as typed (a multi-line system message keeps its line breaks).
        "system" => Ok(Command::System((!value.is_empty()).then(|| value.to_string()))),
        "parameter" => parse_parameter(value).map(Command::Parameter),
        "think" => no_argument("/set think", value, Command::Think(true)),
        "nothink" => no_argument("/set nothink", value, Command::Think(false)),
        "" => Err(error("/set needs a setting: format, noformat, system, parameter, think or nothink")),
        other => Err(error(format!(
            "unknown setting `{other}` for /set: format, noformat, system, parameter, think or nothink"
        ))),
    }
}

fn parse_parameter(s: &str) -> Result<Parameter, CommandError> {
    let (name, value) = split_word(s);
    if name.is_empty() {
        return Err(error(format!("/set parameter NAME VALUE: NAME is one of {}", PARAMETER_NAMES.join(", "))));
    }
    if !PARAMETER_NAMES.contains(&name) {
        return Err(error(format!("unknown parameter `{name}`; known: {}", PARAMETER_NAMES.join(", "))));
    }
    if value.is_empty() {
        return Err(error(format!("/set parameter {name} needs a value")));
    }
    let float = |what: &str| -> Result<f32, CommandError> {
        match value.parse::<f32>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(error(format!("{name} takes {what}, not `{value}`"))),
        }
    };
    let count = || -> Result<usize, CommandError> {
        value.parse::<usize>().map_err(|_| error(format!("{name} takes a whole number of 0 or more, not `{value}`")))
    };
    Ok(match name {
        "temperature" => Parameter::Temperature(float("a number (0 = greedy)")?),
        "top_k" => Parameter::TopK(count()?),
        "top_p" => Parameter::TopP(float("a number in (0, 1]")?),
        "min_p" => Parameter::MinP(float("a number in [0, 1]")?),
        "repeat_penalty" => Parameter::RepeatPenalty(float("a positive number (1 = off)")?),
        "repeat_last_n" => Parameter::RepeatLastN(count()?),
        "seed" => Parameter::Seed(value.parse().map_err(|_| error(format!("seed takes a whole number, not `{value}`")))?),
        "num_predict" => match value {
            "-1" => Parameter::NumPredict(None),
            _ => match value.parse::<usize>() {
                Ok(n) if n > 0 => Parameter::NumPredict(Some(n)),
                _ => return Err(error(format!("num_predict takes a number of tokens (at least 1, or -1 for no limit), not `{value}`"))),
            },
        },
        "num_ctx" => match count()? {
            0 => return Err(error("num_ctx must be at least 1")),
            n => Parameter::NumCtx(n),
        },
        "stop" => Parameter::Stop(value.split_whitespace().map(str::to_string).collect()),
        _ => unreachable!("every name in PARAMETER_NAMES is handled"),
    })
}

/// Gathers `"""` multi-line input, one line at a time.
///
/// Closed (the start state), a line is complete by itself, unless it opens a block: it starts
/// with `"""` (a message), or it is a command with `"""` in it (`/set system """`). The text
/// after the opening quotes, if any, is the block's first line. Open, each line is added until
/// one that ends with `"""`, which closes the block; the quotes are dropped and the lines
/// joined with line breaks. A line that opens and closes (`"""one line"""`) is complete at once.
#[derive(Debug, Default)]
pub struct MultiLine {
    /// The open block; `None` when closed.
    open: Option<Block>,
}

/// An open block: the text before its opening quotes (a command, or nothing) and its lines.
#[derive(Debug)]
struct Block {
    prefix: String,
    lines: Vec<String>,
}

impl Block {
    fn finish(mut self, last: &str) -> String {
        if !last.is_empty() {
            self.lines.push(last.to_string());
        }
        self.prefix + &self.lines.join("\n")
    }
}

const QUOTES: &str = "\"\"\"";

impl MultiLine {
    /// A reader with no block open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a block is open (the prompt shows `... `).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Drops an open block (Ctrl-C).
    pub fn cancel(&mut self) {
        self.open = None;
    }

    /// Takes one line (without its line break): the complete input, or `None` while a block
    /// is open.
    pub fn feed(&mut self, line: &str) -> Option<String> {
        if let Some(mut block) = self.open.take() {
            return match line.trim_end().strip_suffix(QUOTES) {
                Some(last) => Some(block.finish(last)),
                None => {
                    block.lines.push(line.to_string());
                    self.open = Some(block);
                    None
                }
            };
        }
        let start = line.trim_start();
        let opens = start.starts_with(QUOTES) || (start.starts_with('/') && line.contains(QUOTES));
        let Some(at) = line.find(QUOTES).filter(|_| opens) else {
            return Some(line.to_string());
        };
        let block = Block { prefix: line[..at].to_string(), lines: Vec::new() };
        let after = &line[at + QUOTES.len()..];
        if let Some(inner) = after.trim_end().strip_suffix(QUOTES) {
            return Some(block.finish(inner));
        }
        let mut block = block;
        if !after.trim().is_empty() {
            block.lines.push(after.to_string());
        }
        self.open = Some(block);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(lines: &[&str]) -> (Vec<String>, bool) {
        let mut m = MultiLine::new();
        let done = lines.iter().filter_map(|l| m.feed(l)).collect();
        (done, m.is_open())
    }

    #[test]
    fn plain_lines_are_complete_at_once() {
        assert_eq!(feed_all(&["hello", "/show", "say \"\"\" in the middle"]), (vec!["hello".into(), "/show".into(), "say \"\"\" in the middle".into()], false));
    }

    #[test]
    fn a_block_gathers_lines_until_closing_quotes() {
        let (done, open) = feed_all(&["\"\"\"", "first line", "", "  indented", "last\"\"\""]);
        assert_eq!(done, vec!["first line\n\n  indented\nlast".to_string()]);
        assert!(!open);
        let (done, _) = feed_all(&["\"\"\"Dear model,", "hi.", "\"\"\""]);
        assert_eq!(done, vec!["Dear model,\nhi.".to_string()]);
    }

    #[test]
    fn a_block_stays_open_until_closed() {
        let mut m = MultiLine::new();
        assert_eq!(m.feed("\"\"\"one"), None);
        assert!(m.is_open());
        assert_eq!(m.feed("two \"\"\" not the end"), None);
        assert!(m.is_open());
        assert_eq!(m.feed("three\"\"\"  ").as_deref(), Some("one\ntwo \"\"\" not the end\nthree"));
        assert!(!m.is_open());
    }

    #[test]
    fn opening_and_closing_on_one_line() {
        assert_eq!(feed_all(&["\"\"\"just this\"\"\""]).0, vec!["just this".to_string()]);
    }

    #[test]
    fn a_command_can_open_a_block() {
        let (done, _) = feed_all(&["/set system \"\"\"", "You are terse.", "Answer in French.\"\"\""]);
        assert_eq!(done, vec!["/set system You are terse.\nAnswer in French.".to_string()]);
        let cmd = parse_command(&done[0]).unwrap();
        assert_eq!(cmd, Command::System(Some("You are terse.\nAnswer in French.".into())));
    }

    #[test]
    fn cancel_drops_the_open_block() {
        let mut m = MultiLine::new();
        assert_eq!(m.feed("\"\"\""), None);
        assert_eq!(m.feed("draft"), None);
        m.cancel();
        assert!(!m.is_open());
        assert_eq!(m.feed("fresh").as_deref(), Some("fresh"));
    }

    #[test]
    fn inputs_are_messages_commands_or_blank() {
        assert_eq!(parse_input("   "), None);
        assert_eq!(parse_input("hi there"), Some(Ok(Input::Message("hi there".into()))));
        assert_eq!(parse_input("  /bye "), Some(Ok(Input::Command(Command::Bye))));
        assert!(matches!(parse_input("/nope"), Some(Err(_))));
    }

    #[test]
    fn commands_parse() {
        assert_eq!(parse_command("/set format json"), Ok(Command::FormatJson));
        assert_eq!(parse_command("/set format  schema.json "), Ok(Command::FormatSchema("schema.json".into())));
        assert_eq!(parse_command("/set noformat"), Ok(Command::NoFormat));
        assert_eq!(parse_command("/set system You are a pirate."), Ok(Command::System(Some("You are a pirate.".into()))));
        assert_eq!(parse_command("/set system"), Ok(Command::System(None)));
        assert_eq!(parse_command("/set think"), Ok(Command::Think(true)));
        assert_eq!(parse_command("/set nothink"), Ok(Command::Think(false)));
        assert_eq!(parse_command("/show"), Ok(Command::Show));
        assert_eq!(parse_command("/clear"), Ok(Command::Clear));
        assert_eq!(parse_command("/bye"), Ok(Command::Bye));
        assert_eq!(parse_command("/?"), Ok(Command::Help));
        assert_eq!(parse_command("/help"), Ok(Command::Help));
    }

    #[test]
    fn parameters_parse() {
        let p = |s: &str| parse_command(&format!("/set parameter {s}"));
        assert_eq!(p("temperature 0"), Ok(Command::Parameter(Parameter::Temperature(0.0))));
        assert_eq!(p("top_k 20"), Ok(Command::Parameter(Parameter::TopK(20))));
        assert_eq!(p("top_p 0.5"), Ok(Command::Parameter(Parameter::TopP(0.5))));
        assert_eq!(p("min_p 0.05"), Ok(Command::Parameter(Parameter::MinP(0.05))));
        assert_eq!(p("repeat_penalty 1.2"), Ok(Command::Parameter(Parameter::RepeatPenalty(1.2))));
        assert_eq!(p("repeat_last_n 0"), Ok(Command::Parameter(Parameter::RepeatLastN(0))));
        assert_eq!(p("seed 42"), Ok(Command::Parameter(Parameter::Seed(42))));
        assert_eq!(p("num_predict 64"), Ok(Command::Parameter(Parameter::NumPredict(Some(64)))));
        assert_eq!(p("num_predict -1"), Ok(Command::Parameter(Parameter::NumPredict(None))));
        assert_eq!(p("num_ctx 512"), Ok(Command::Parameter(Parameter::NumCtx(512))));
        assert_eq!(p("stop END ###"), Ok(Command::Parameter(Parameter::Stop(vec!["END".into(), "###".into()]))));
    }

    #[test]
    fn bad_commands_and_values_say_what_was_expected() {
        let err = |s: &str| parse_command(s).unwrap_err().to_string();
        assert!(err("/frobnicate").contains("unknown command `/frobnicate`"));
        assert!(err("/set").contains("/set needs a setting"));
        assert!(err("/set colour red").contains("unknown setting `colour`"));
        assert!(err("/set format").contains("`json` or a JSON Schema file"));
        assert!(err("/set parameter").contains("NAME is one of"));
        assert!(err("/set parameter warmth 1").contains("unknown parameter `warmth`"));
        assert!(err("/set parameter temperature").contains("needs a value"));
        assert!(err("/set parameter temperature hot").contains("temperature takes a number"));
        assert!(err("/set parameter temperature NaN").contains("temperature takes a number"));
        assert!(err("/set parameter top_k -3").contains("whole number"));
        assert!(err("/set parameter seed x").contains("seed takes a whole number"));
        assert!(err("/set parameter num_predict 0").contains("at least 1, or -1"));
        assert!(err("/set parameter num_ctx 0").contains("at least 1"));
        assert!(err("/bye now").contains("takes no argument"));
        assert!(err("/set noformat please").contains("takes no argument"));
    }
}
