//! The crate's module imports have no circle: data flows one way between its files.
//!
//! Every file of `src/` is a module (an inline `mod x { … }`, such as a `tests` block, is part of
//! its file). File A imports file B when A names an item of B by a path: a `use` of a `crate::`,
//! `super::`, `self::` or child-module path, or such a path written inline in the code
//! (`crate::a::b::f()`, `super::x::Y`, `child::f()`). A path is resolved to the deepest file it
//! names; a name a module re-exports (`pub use x::Y`) is followed to where it is defined, so that
//! `use super::Y` in a sibling of `x` imports `x`, not the parent.
//!
//! The tree is not an import: a parent's `mod x;` and its re-exports of what lies below it
//! (`pub use x::Y`, the parent as a face) draw no arrow. Everything else does, the parent's own
//! code included: a parent whose code calls into a child (`child::f()`) while the child uses an
//! item the parent defines (`super::Shared`) is a circle, as two siblings that import each other
//! are — the parent is then a continuation of its child, or the other way round.
//!
//! The scanner reads the text (comments and literals blanked), not the compiler's view: it needs no
//! build and no dependency. Its own tests below hold it to a few small crates written inline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file: its module path (`[]` for lib.rs) and its text.
struct Source {
    rel: String,
    module: Vec<String>,
    text: String,
}

/// A path a file names, with whether it is a `pub use` (a re-export) and the module it is
/// written in (the file's, or an inline module inside it).
struct Named {
    path: Vec<String>,
    at: Vec<String>,
    reexport: bool,
}

/// The crate as files and the paths each names.
struct Crate {
    /// Module path → file (its index in `files`); inline modules map to their file.
    modules: BTreeMap<Vec<String>, usize>,
    files: Vec<Source>,
    named: Vec<Vec<Named>>,
}

/// Where a literal or comment starting at `c[i]` ends (one past it); `None`: no literal starts there.
fn literal_end(c: &[char], i: usize) -> Option<usize> {
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    match c[i] {
        '/' if c.get(i + 1) == Some(&'/') => Some(c[i..].iter().position(|&ch| ch == '\n').map_or(c.len(), |p| i + p)),
        '/' if c.get(i + 1) == Some(&'*') => {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            Some(j)
        }
        // A raw string: r"…", r#"…"#, br"…".
        'r' | 'b' if !(i > 0 && ident(c[i - 1])) => {
            let k = if c[i] == 'b' && c.get(i + 1) == Some(&'r') { i + 2 } else if c[i] == 'r' { i + 1 } else { return None };
            let hashes = c[k..].iter().take_while(|&&ch| ch == '#').count();
            if c.get(k + hashes) != Some(&'"') {
                return None;
            }
            let mut j = k + hashes + 1;
            while j < c.len() && !(c[j] == '"' && c[j + 1..].iter().take(hashes).filter(|&&ch| ch == '#').count() == hashes) {
                j += 1;
            }
            Some((j + 1 + hashes).min(c.len()))
        }
        '"' => {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            Some((j + 1).min(c.len()))
        }
        // A char literal ('x', '\n', '\u{1F600}'); else a lifetime, left as it is.
        '\'' if c.get(i + 1) == Some(&'\\') => c[i + 3..].iter().position(|&ch| ch == '\'').map(|p| i + 3 + p + 1),
        '\'' if c.get(i + 2) == Some(&'\'') => Some(i + 3),
        _ => None,
    }
}

/// Comments, strings and char literals replaced by spaces (newlines kept).
fn blank(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        match literal_end(&c, i) {
            Some(end) => {
                out.extend(c[i..end].iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
                i = end;
            }
            None => {
                out.push(c[i]);
                i += 1;
            }
        }
    }
    out
}

/// Identifiers, `::` and single punctuation characters.
fn tokens(text: &str) -> Vec<String> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphanumeric() || c[i] == '_' {
            let j = c[i..].iter().position(|&ch| !(ch.is_alphanumeric() || ch == '_')).map_or(c.len(), |p| i + p);
            out.push(c[i..j].iter().collect());
            i = j;
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else if c[i].is_whitespace() {
            i += 1;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// A `use` tree from `t[i]` on (after `use`), expanded into whole paths; returns the index past it.
/// `self` in braces names the prefix itself; a glob names the module it is in.
fn use_tree(t: &[String], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match t.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                loop {
                    if t.get(i).map(String::as_str) == Some("}") {
                        return i + 1;
                    }
                    i = use_tree(t, i, &path, out);
                    match t.get(i).map(String::as_str) {
                        Some(",") => i += 1,
                        Some("}") => return i + 1,
                        _ => return i,
                    }
                }
            }
            Some("*") => {
                out.push(path);
                return i + 1;
            }
            Some("self") if path.len() == prefix.len() && !prefix.is_empty() => {
                out.push(path);
                i += 1;
                if t.get(i).map(String::as_str) == Some("as") {
                    i += 2;
                }
                return i;
            }
            Some(id) if id.chars().next().is_some_and(|ch| ch.is_alphanumeric() || ch == '_') => {
                path.push(id.to_string());
                i += 1;
                if t.get(i).map(String::as_str) == Some("::") {
                    i += 1;
                    continue;
                }
                out.push(path);
                if t.get(i).map(String::as_str) == Some("as") {
                    i += 2;
                }
                return i;
            }
            _ => return i,
        }
    }
}

/// The paths one file names: its `use` trees, and the paths written inline from `crate`, `super`,
/// `self` or a module declared in the file.
fn named_in(text: &str, module: &[String]) -> (Vec<Named>, Vec<Vec<String>>) {
    let t = tokens(&blank(text));
    let children: BTreeSet<&str> = t.windows(2).filter(|w| w[0] == "mod").map(|w| w[1].as_str()).collect();
    let mut named = Vec::new();
    let mut inline_mods = Vec::new();
    // Inline modules open here: (name, brace depth inside it).
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let at = |stack: &[(String, usize)]| module.iter().cloned().chain(stack.iter().map(|(n, _)| n.clone())).collect::<Vec<_>>();
    let mut i = 0;
    while i < t.len() {
        match t[i].as_str() {
            "{" => depth += 1,
            "}" => {
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if t.get(i + 2).map(String::as_str) == Some("{") => {
                stack.push((t[i + 1].clone(), depth + 1));
                let mut m = at(&stack);
                m.shrink_to_fit();
                inline_mods.push(m);
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                // `pub use`, `pub(crate) use`, `pub(super) use`: a re-export.
                let reexport = i >= 1 && (t[i - 1] == "pub" || (i >= 4 && t[i - 1] == ")" && t[i - 4] == "pub"));
                let mut paths = Vec::new();
                i = use_tree(&t, i + 1, &[], &mut paths);
                for path in paths {
                    named.push(Named { path, at: at(&stack), reexport });
                }
                continue;
            }
            id if (id == "crate" || id == "super" || id == "self" || children.contains(id))
                && t.get(i + 1).map(String::as_str) == Some("::")
                && !(i >= 1 && t[i - 1] == "::") =>
            {
                let mut path = vec![id.to_string()];
                let mut j = i + 1;
                while t.get(j).map(String::as_str) == Some("::")
                    && t.get(j + 1).is_some_and(|s| s.chars().next().is_some_and(|ch| ch.is_alphanumeric() || ch == '_'))
                {
                    path.push(t[j + 1].clone());
                    j += 2;
                }
                named.push(Named { path, at: at(&stack), reexport: false });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (named, inline_mods)
}

impl Crate {
    /// `files`: (path relative to src/, text).
    fn new(files: Vec<(String, String)>) -> Crate {
        let mut modules = BTreeMap::new();
        let mut sources = Vec::new();
        for (rel, text) in files {
            let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                parts.pop();
            }
            modules.insert(parts.clone(), sources.len());
            sources.push(Source { rel, module: parts, text });
        }
        let mut named = Vec::new();
        for (k, s) in sources.iter().enumerate() {
            let (n, inline) = named_in(&s.text, &s.module);
            for m in inline {
                modules.entry(m).or_insert(k);
            }
            named.push(n);
        }
        Crate { modules, files: sources, named }
    }

    fn read(src: &Path) -> Crate {
        fn walk(dir: &Path, src: &Path, out: &mut Vec<(String, String)>) {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
            entries.sort();
            for p in entries {
                if p.is_dir() {
                    walk(&p, src, out);
                } else if p.extension().is_some_and(|e| e == "rs") {
                    let rel = p.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
                    out.push((rel, std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut files = Vec::new();
        walk(src, src, &mut files);
        Crate::new(files)
    }

    /// A path written in module `at`, made absolute; `None` outside the crate (std, a dependency).
    fn absolute(&self, path: &[String], at: &[String]) -> Option<Vec<String>> {
        let mut base = at.to_vec();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                let mut child = at.to_vec();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
            }
            None => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file an absolute path names: its deepest module, or where a name it re-exports is defined.
    fn file_of(&self, abs: &[String], hops: usize) -> usize {
        let mut n = abs.len();
        while !self.modules.contains_key(&abs[..n]) {
            n -= 1;
        }
        let file = self.modules[&abs[..n]];
        if n < abs.len() && hops < 8 {
            let name = &abs[n];
            for r in self.named[file].iter().filter(|r| r.reexport) {
                if r.path.last() == Some(name) {
                    if let Some(target) = self.absolute(&r.path, &r.at) {
                        return self.file_of(&target, hops + 1);
                    }
                }
            }
        }
        file
    }

    /// Arrows file → file, each with the paths that draw it.
    fn imports(&self) -> BTreeMap<(usize, usize), BTreeSet<String>> {
        let mut out: BTreeMap<(usize, usize), BTreeSet<String>> = BTreeMap::new();
        for (k, named) in self.named.iter().enumerate() {
            let own = &self.files[k].module;
            for n in named {
                let Some(abs) = self.absolute(&n.path, &n.at) else { continue };
                // The tree: a module re-exporting what lies below it.
                if n.reexport && abs.len() > own.len() && abs.starts_with(own) {
                    continue;
                }
                let to = self.file_of(&abs, 0);
                if to != k {
                    out.entry((k, to)).or_default().insert(n.path.join("::"));
                }
            }
        }
        out
    }

    /// Every circle: files that import each other in a loop (Tarjan's strongly connected
    /// components), each with the arrows inside it.
    fn circles(&self) -> Vec<String> {
        let imports = self.imports();
        let n = self.files.len();
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &(a, b) in imports.keys() {
            next[a].push(b);
        }
        struct Tarjan<'a> {
            next: &'a [Vec<usize>],
            index: Vec<Option<usize>>,
            low: Vec<usize>,
            on: Vec<bool>,
            stack: Vec<usize>,
            count: usize,
            out: Vec<Vec<usize>>,
        }
        impl Tarjan<'_> {
            fn visit(&mut self, v: usize) {
                self.index[v] = Some(self.count);
                self.low[v] = self.count;
                self.count += 1;
                self.stack.push(v);
                self.on[v] = true;
                for k in 0..self.next[v].len() {
                    let w = self.next[v][k];
                    match self.index[w] {
                        None => {
                            self.visit(w);
                            self.low[v] = self.low[v].min(self.low[w]);
                        }
                        Some(i) if self.on[w] => self.low[v] = self.low[v].min(i),
                        _ => {}
                    }
                }
                if Some(self.low[v]) == self.index[v] {
                    let mut scc = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on[w] = false;
                        scc.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if scc.len() > 1 {
                        scc.sort();
                        self.out.push(scc);
                    }
                }
            }
        }
        let mut t = Tarjan { next: &next, index: vec![None; n], low: vec![0; n], on: vec![false; n], stack: Vec::new(), count: 0, out: Vec::new() };
        for v in 0..n {
            if t.index[v].is_none() {
                t.visit(v);
            }
        }
        t.out
            .iter()
            .map(|scc| {
                let names: Vec<&str> = scc.iter().map(|&f| self.files[f].rel.as_str()).collect();
                let arrows: Vec<String> = imports
                    .iter()
                    .filter(|((a, b), _)| scc.contains(a) && scc.contains(b))
                    .map(|((a, b), via)| {
                        let via: Vec<&str> = via.iter().map(String::as_str).collect();
                        format!("  {} -> {}: {}", self.files[*a].rel, self.files[*b].rel, via.join(", "))
                    })
                    .collect();
                format!("circle of {}:\n{}", names.join(", "), arrows.join("\n"))
            })
            .collect()
    }
}

#[test]
fn no_module_imports_another_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = Crate::read(&src);
    assert!(krate.files.len() > 40 && krate.imports().len() > 100, "the scanner read the crate");
    let circles = krate.circles();
    assert!(circles.is_empty(), "import circles in src/ (move what both sides need below them):\n{}", circles.join("\n"));
}

#[cfg(test)]
mod scanner {
    use super::*;

    fn krate(files: &[(&str, &str)]) -> Crate {
        Crate::new(files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect())
    }

    fn arrows(c: &Crate) -> Vec<(String, String)> {
        c.imports().keys().map(|&(a, b)| (c.files[a].rel.clone(), c.files[b].rel.clone())).collect()
    }

    #[test]
    fn a_parent_that_only_declares_and_reexports_is_the_tree() {
        let c = krate(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "mod x;\nmod y;\npub use x::{X, f as g};\npub(crate) use y::Y;"),
            ("a/x.rs", "use super::Y; // via the face, to y.rs\npub struct X;"),
            ("a/y.rs", "pub struct Y;"),
        ]);
        assert_eq!(arrows(&c), [("a/x.rs".to_string(), "a/y.rs".to_string())]);
        assert!(c.circles().is_empty());
    }

    #[test]
    fn a_parent_calling_into_a_child_that_uses_the_parents_items_is_a_circle() {
        let c = krate(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "mod t;\npub struct Shared;\nfn start() { t::run(); }"),
            ("a/t.rs", "use super::{Shared, /* not a path: */};\npub fn run() { let s = \"crate::b::Z\"; }"),
        ]);
        let circles = c.circles();
        assert_eq!(circles.len(), 1, "{circles:?}");
        assert!(circles[0].contains("a/mod.rs -> a/t.rs: t::run") && circles[0].contains("a/t.rs -> a/mod.rs: super::Shared"), "{}", circles[0]);
    }

    #[test]
    fn inline_paths_nested_use_trees_and_inline_modules_count() {
        let c = krate(&[
            ("lib.rs", "pub mod a;\npub mod b;"),
            ("a/mod.rs", "pub mod p;\npub mod q;"),
            ("a/p.rs", "use crate::{b::{self, W}, a::q::{Q as R}};\nfn f() { crate::b::g(); let c = 'x'; let l: &'static str = \"\"; }"),
            ("a/q.rs", "pub struct Q;\n#[cfg(test)]\nmod tests {\n    use super::super::p;\n    use super::Q;\n}"),
            ("b.rs", "pub struct W;\npub fn g() {}\nfn h() -> u32 { std::u32::MAX }"),
        ]);
        let a = arrows(&c);
        assert!(a.contains(&("a/p.rs".into(), "b.rs".into())) && a.contains(&("a/p.rs".into(), "a/q.rs".into())), "{a:?}");
        assert!(a.contains(&("a/q.rs".into(), "a/p.rs".into())), "a test block's `super::super` is the parent's: {a:?}");
        assert_eq!(c.circles().len(), 1, "p and q import each other");
    }
}
