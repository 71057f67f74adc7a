//! The architecture, checked on the sources of every crate of the workspace:
//! - no two files of a crate import each other (module dependencies go one way);
//! - the host is above the command set: no `insitu_flash` in the host, no device program or firmware
//!   internals (`insitu_device::programs`, `insitu_device::firmware`) in it, the fronts (CLI, Python) and the reports on the host
//!   crate only;
//! - `unsafe` only in the kernels' `arch/` and in one `sys.rs` per crate, each block with a SAFETY comment.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file of a crate (`lib.rs` / `main.rs` are the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().to_string()).collect();
    let last = parts.pop().unwrap();
    if !matches!(last.as_str(), "mod.rs" | "lib.rs" | "main.rs") {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// The code of a file without its unit tests and comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// `use a::{b::C, d};` as full paths `a::b::C`, `a::d`.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = format!("{prefix}{}", &tree[..open]);
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&head, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&head, &inner[start..], out);
    } else if !tree.is_empty() {
        out.push(format!("{prefix}{}", tree.split(" as ").next().unwrap_or(tree).trim()));
    }
}

/// Every path a file refers to: its `use` trees, expanded, and `crate::` / `super::` paths in code.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `use` items start a line (after an optional visibility) and end at the next `;`.
    let mut at = 0;
    for line in code.split_inclusive('\n') {
        let t = line.trim_start();
        let t = t.strip_prefix("pub ").or_else(|| t.strip_prefix("pub(crate) ")).unwrap_or(t);
        if let Some(tree) = t.strip_prefix("use ") {
            let start = at + (line.len() - tree.len());
            let end = code[start..].find(';').map_or(code.len(), |e| start + e);
            expand("", &code[start..end], &mut out);
        }
        at += line.len();
    }
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        for (i, _) in code.match_indices(start) {
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':')
            {
                continue;
            }
            let end = code[i..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| i + e);
            out.push(code[i..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// The file a path resolves to, seen from module `here`: the deepest module on the path.
fn resolve(path: &str, here: &[String], modules: &BTreeMap<Vec<String>, PathBuf>) -> Option<PathBuf> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = match segs.first().copied() {
        Some("crate") => {
            segs.remove(0);
            Vec::new()
        }
        Some("self") => {
            segs.remove(0);
            here.to_vec()
        }
        Some("super") => {
            let mut b = here.to_vec();
            while segs.first() == Some(&"super") {
                segs.remove(0);
                b.pop();
            }
            b
        }
        Some(first) => {
            // A relative path is ours only if it starts with a child module of `here`.
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
            here.to_vec()
        }
        None => return None,
    };
    for s in segs {
        let mut next = base.clone();
        next.push(s.to_string());
        if modules.contains_key(&next) {
            base = next;
        } else {
            break;
        }
    }
    modules.get(&base).cloned()
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let mut cycles = Vec::new();
    for krate in std::fs::read_dir(crates_dir()).unwrap() {
        let src = krate.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let modules: BTreeMap<Vec<String>, PathBuf> =
            files.iter().map(|f| (module_of(&src, f), f.clone())).collect();
        let mut edges: BTreeSet<(PathBuf, PathBuf)> = BTreeSet::new();
        for f in &files {
            let here = module_of(&src, f);
            for p in paths(&code(&std::fs::read_to_string(f).unwrap())) {
                if let Some(to) = resolve(&p, &here, &modules) {
                    if &to != f {
                        edges.insert((f.clone(), to));
                    }
                }
            }
        }
        for (a, b) in &edges {
            if a < b && edges.contains(&(b.clone(), a.clone())) {
                cycles.push(format!("{} <-> {}", a.display(), b.display()));
            }
        }
    }
    assert!(cycles.is_empty(), "files that import each other:\n{}", cycles.join("\n"));
}

#[test]
fn the_host_stays_above_the_command_set() {
    let root = crates_dir();
    let mut problems = Vec::new();
    let mut check = |krate: &str, forbidden: &[&str]| {
        let mut files = Vec::new();
        rust_files(&root.join(krate), &mut files);
        for f in files {
            // The code, unit tests too, without comments (a doc may name a module), and every path its `use`
            // trees name expanded (`use insitu_device::{firmware::x}` names insitu_device::firmware::x).
            let text = std::fs::read_to_string(&f).unwrap();
            let text: String =
                text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
            let used = paths(&text);
            for bad in forbidden {
                if text.contains(bad) || used.iter().any(|p| p.starts_with(bad)) {
                    problems.push(format!("{} uses {bad}", f.display()));
                }
            }
        }
    };
    check("insitu-host/src", &["insitu_flash", "insitu_device::programs", "insitu_device::firmware"]);
    check("insitu-cli/src", &["insitu_flash", "insitu_device", "insitu_kernels"]);
    check("insitu-py/src", &["insitu_flash", "insitu_device", "insitu_kernels"]);
    check("insitu-report/src", &["insitu_flash", "insitu_device", "insitu_kernels"]);
    // The [dependencies] of a manifest (not its dev-dependencies).
    let deps = |manifest: &str| {
        let text = std::fs::read_to_string(root.join(manifest)).unwrap();
        let start = text.find("[dependencies]").map_or(text.len(), |i| i + 14);
        let end = text[start..].find("\n[").map_or(text.len(), |e| start + e);
        text[start..end].to_string()
    };
    for (manifest, below) in [
        ("insitu-kernels/Cargo.toml", &["insitu-flash", "insitu-device", "insitu-host"][..]),
        ("insitu-flash/Cargo.toml", &["insitu-device", "insitu-host"][..]),
        ("insitu-host/Cargo.toml", &["insitu-flash"][..]),
        ("insitu-cli/Cargo.toml", &["insitu-flash", "insitu-device", "insitu-kernels"][..]),
        ("insitu-py/Cargo.toml", &["insitu-flash", "insitu-device", "insitu-kernels"][..]),
        ("insitu-report/Cargo.toml", &["insitu-flash", "insitu-device", "insitu-kernels"][..]),
    ] {
        for b in below {
            if deps(manifest).contains(b) {
                problems.push(format!("{manifest} depends on {b}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn unsafe_code_lives_in_arch_and_sys_only_with_its_safety_argument() {
    let mut files = Vec::new();
    rust_files(&crates_dir(), &mut files);
    let mut problems = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = code(&text);
        if !(code.contains("unsafe {") || code.contains("unsafe fn") || code.contains("unsafe impl")) {
            continue;
        }
        let allowed =
            f.file_name().is_some_and(|n| n == "sys.rs") || f.components().any(|c| c.as_os_str() == "arch");
        if !allowed {
            problems.push(format!("{}: unsafe outside arch/ and sys.rs", f.display()));
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let l = l.split("//").next().unwrap_or("");
            if l.contains("unsafe {") || l.contains("unsafe impl") {
                let above = lines[i.saturating_sub(6)..i].join("\n");
                if !above.contains("SAFETY") && !lines[i].contains("SAFETY") {
                    problems.push(format!("{}:{}: unsafe without a SAFETY comment", f.display(), i + 1));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
