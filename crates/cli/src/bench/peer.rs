//! llguidance as the peer engine, on a token table built from the same [`Vocabulary`].
use super::*;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
use llguidance::ParserFactory;

struct Env {
    trie: TokTrie,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }
    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        self.trie.greedy_tokenize(s)
    }
    fn tokenize_is_canonical(&self) -> bool {
        false
    }
}

pub(super) struct Llg {
    factory: ParserFactory,
}

impl Llg {
    /// Special and unused tokens get llguidance's marker byte 0xFF in front, so grammar
    /// text never produces them (the same rule formwork follows).
    pub(super) fn new(vocab: &Vocabulary, eos: TokenId) -> anyhow::Result<Self> {
        let words: Vec<Vec<u8>> = vocab
            .ids()
            .map(|t| {
                if vocab.is_text(t) {
                    vocab.token_bytes(t).to_vec()
                } else {
                    let mut w = vec![0xFF];
                    w.extend_from_slice(vocab.token_bytes(t));
                    if w.len() == 1 {
                        w.extend_from_slice(format!("<unused_{}>", t.0).as_bytes());
                    }
                    w
                }
            })
            .collect();
        let info = TokRxInfo::new(vocab.len() as u32, eos.0);
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(Env { trie });
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| anyhow::anyhow!("llguidance: {e}"))?;
        factory.quiet();
        Ok(Llg { factory })
    }
}

struct LlgCompiled<'a> {
    factory: &'a ParserFactory,
    parser: llguidance::TokenParser,
}

struct LlgWalk {
    m: llguidance::Matcher,
    mask: Option<SimpleVob>,
}

impl Walk for LlgWalk {
    fn compute_mask(&mut self) -> Result<(), String> {
        match self.m.compute_mask_or_eos() {
            Ok(v) => {
                self.mask = Some(v);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }
    fn allowed(&self, t: u32) -> bool {
        self.mask.as_ref().is_some_and(|m| m.is_allowed(t))
    }
    fn commit(&mut self, t: u32) -> Result<(), String> {
        self.m.consume_token(t).map_err(|e| e.to_string())
    }
}

impl Compiled for LlgCompiled<'_> {
    fn walk(&self) -> Result<Box<dyn Walk + '_>, String> {
        let _ = self.factory;
        let m = llguidance::Matcher::new(Ok(self.parser.deep_clone()));
        if let Some(e) = m.get_error() {
            return Err(e);
        }
        Ok(Box::new(LlgWalk { m, mask: None }))
    }
    fn memory(&self) -> Option<usize> {
        None
    }
}

impl Engine for Llg {
    fn name(&self) -> &'static str {
        "llguidance"
    }
    fn compile(&self, src: &Source<'_>) -> Result<Box<dyn Compiled + '_>, String> {
        let tg = match src {
            Source::Schema(s) => TopLevelGrammar::from_json_schema((*s).clone()),
            Source::Grammar(g) => TopLevelGrammar::from_lark(super::lark::to_lark(g)),
            Source::AnyJson(_) => TopLevelGrammar::from_json_schema(json!({})),
        };
        let parser = self.factory.create_parser(tg).map_err(|e| e.to_string())?;
        Ok(Box::new(LlgCompiled {
            factory: &self.factory,
            parser,
        }))
    }
}
