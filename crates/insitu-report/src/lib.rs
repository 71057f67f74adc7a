//! The repros' reports. A repro (in `insitu-host`) turns its run into [`PaperFigures`]: each figure's rows
//! (the paper's value | modeled | measured here | deviation | why), its verdict against the paper and its
//! series. This crate writes them for a reader:
//!
//! ```text
//! repro-out/
//!   REPORT.md              every paper found in the folder: a summary of the verdicts, then each figure
//!   nascent/figures.json   the paper's figures as data (what REPORT.md is made from)
//!   nascent/fig13.md       the figure's table and verdict
//!   nascent/fig13.svg|png  its plot, axes and series named like the paper's figure
//! ```
//!
//! [`write()`] writes one paper's files and makes `REPORT.md` anew from every `*/figures.json` in the folder,
//! so running the repros one at a time builds the same report as `insitu repro all`.

mod plot;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use insitu_host::figure::{fmt_value, paper_text, Figure, PaperFigures};
use insitu_host::outfile::OutFile;

/// The report's order of papers (others follow, by name).
const ORDER: &[&str] = &["nascent", "psacs", "intersect", "selfsort", "bluedbm-net", "bluedbm-apps"];

/// What can go wrong writing a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a repro's figures.json ({source})")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("plot {path}: {detail}")]
    Plot { path: PathBuf, detail: String },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Output(#[from] insitu_host::HostError),
}

pub type Result<T> = std::result::Result<T, ReportError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io { path: path.to_path_buf(), source }
}

/// One figure's table and verdict, in Markdown.
pub fn figure_table(f: &Figure) -> String {
    let mut s = String::from(
        "| value | unit | paper | modeled | measured here | deviation | why |\n|---|---|---:|---:|---:|---:|---|\n",
    );
    for r in &f.rows {
        let dev = r.deviation.map_or(String::new(), |d| {
            let mark = if r.within() == Some(false) { " (!)" } else { "" };
            format!("{:+.0}%{mark}", d * 100.0)
        });
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell(&r.label),
            r.unit,
            paper_text(r),
            fmt_value(r.modeled),
            r.measured.map_or("-".into(), fmt_value),
            dev,
            cell(&r.note)
        );
    }
    let _ = write!(s, "\n**Verdict:** {}\n", f.verdict.line);
    s
}

/// A table cell: no line breaks, no column separators.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

/// A paper's figures as Markdown: for each, its title, table and verdict (and its plot, linked from
/// `plots`, a folder relative to where the text will be read; `None` for none).
pub fn markdown(pf: &PaperFigures, plots: Option<&str>) -> String {
    let mut s = format!("## {} (`insitu repro {}`)\n\n{}\n", pf.cites, pf.paper, pf.setup);
    for f in &pf.figures {
        let _ = write!(s, "\n### {}: {}\n\n", f.id, f.title);
        if let (Some(dir), Some(_)) = (plots, &f.plot) {
            let _ = write!(s, "![{} {}]({dir}/{}.svg)\n\n", pf.cites, f.id, f.id);
        }
        s.push_str(&figure_table(f));
    }
    s
}

/// Writes `pf`'s files under `out/<paper>/` and `out/REPORT.md` anew; returns the paths written.
pub fn write(out: &Path, pf: &PaperFigures) -> Result<Vec<PathBuf>> {
    if pf.paper.is_empty() || !pf.paper.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(ReportError::Invalid(format!(
            "a repro's name is letters, digits and '-', not {:?}",
            pf.paper
        )));
    }
    let dir = out.join(&pf.paper);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let mut written = Vec::new();
    for f in &pf.figures {
        let md = dir.join(format!("{}.md", f.id));
        let text = format!("# {} {}: {}\n\n{}\n\n{}", pf.cites, f.id, f.title, pf.setup, figure_table(f));
        write_whole(&md, text.as_bytes())?;
        written.push(md);
        if let Some(p) = &f.plot {
            let title = format!("{} {}", pf.cites, f.id);
            let (svg, png) = (dir.join(format!("{}.svg", f.id)), dir.join(format!("{}.png", f.id)));
            let (svg_part, png_part) = (partial(&svg), partial(&png));
            plot::draw(p, &title, &svg_part, &png_part)?;
            for (part, path) in [(&svg_part, &svg), (&png_part, &png)] {
                std::fs::rename(part, path).map_err(io(path))?;
            }
            written.extend([svg, png]);
        }
    }
    let json = dir.join("figures.json");
    let data =
        serde_json::to_vec_pretty(pf).map_err(|source| ReportError::Json { path: json.clone(), source })?;
    write_whole(&json, &data)?;
    written.push(json);
    written.push(write_report(out)?);
    Ok(written)
}

/// Makes `out/REPORT.md` from every `out/*/figures.json` (written beside and renamed into place). A
/// figures.json that cannot be read (another version's, cut short) is left out and named in the report.
pub fn write_report(out: &Path) -> Result<PathBuf> {
    let mut papers: Vec<PaperFigures> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for e in std::fs::read_dir(out).map_err(io(out))? {
        let path = e.map_err(io(out))?.path().join("figures.json");
        if !path.is_file() {
            continue;
        }
        let read = std::fs::read(&path).map_err(io(&path)).and_then(|data| {
            serde_json::from_slice::<PaperFigures>(&data)
                .map_err(|source| ReportError::Json { path: path.clone(), source })
        });
        match read {
            Ok(pf) => papers.push(pf),
            Err(e) => skipped.push(e.to_string()),
        }
    }
    skipped.sort();
    let rank = |p: &PaperFigures| ORDER.iter().position(|n| *n == p.paper).unwrap_or(ORDER.len());
    papers.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.paper.cmp(&b.paper)));

    let mut s = String::from(
        "# insitu: the seed papers' figures, reproduced\n\n\
         Each figure's table gives the paper's value (as its text states it), the value modeled on the paper's \
         hardware profile (counted work priced by the profile: the same on any machine), the value measured on \
         this machine, and the deviation of the modeled value from the paper's; the verdict says whether the \
         figure is within +-20% of the paper and, where not, which stage of the model makes the difference. \
         Made by `insitu repro`; each paper's files are in its folder.\n\n\
         | paper | figure | verdict |\n|---|---|---|\n",
    );
    for pf in &papers {
        for f in &pf.figures {
            let mark = match f.verdict.within {
                Some(true) => "within",
                Some(false) => "outside",
                None => "no paper value",
            };
            let _ = writeln!(
                s,
                "| {} | [{}](#{}) | **{mark}**: {} |",
                pf.cites,
                f.id,
                anchor(pf, f),
                cell(&f.verdict.line)
            );
        }
    }
    for why in &skipped {
        let _ = writeln!(s, "\n**Left out:** {}", cell(why));
    }
    for pf in &papers {
        s.push('\n');
        let mut md = markdown(pf, Some(&pf.paper));
        // Each figure's heading gets an anchor the summary links to.
        for f in &pf.figures {
            md = md.replace(
                &format!("### {}: {}", f.id, f.title),
                &format!("<a id=\"{}\"></a>\n### {}: {}", anchor(pf, f), f.id, f.title),
            );
        }
        s.push_str(&md);
        if !pf.detail.trim().is_empty() {
            let _ = write!(
                s,
                "\n<details><summary>the run's full tables</summary>\n\n```text\n{}\n```\n</details>\n",
                pf.detail.trim_end()
            );
        }
    }
    let path = out.join("REPORT.md");
    write_whole(&path, s.as_bytes())?;
    Ok(path)
}

/// `.STEM.partial.EXT` beside `path`: where a file is written before it is renamed into place (the
/// extension kept last: the PNG encoder goes by it).
fn partial(path: &Path) -> PathBuf {
    let stem = path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match path.extension() {
        Some(ext) => path.with_file_name(format!(".{stem}.partial.{}", ext.to_string_lossy())),
        None => path.with_file_name(format!(".{stem}.partial")),
    }
}

/// Writes `path` whole or not at all, as every command's output is ([`OutFile`]), so that a run cut off
/// leaves the previous figure (or none), never half of one, for `REPORT.md` to read.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = OutFile::create(path)?;
    std::io::Write::write_all(&mut f, bytes).map_err(io(path))?;
    Ok(f.commit()?)
}

fn anchor(pf: &PaperFigures, f: &Figure) -> String {
    format!("{}-{}", pf.paper, f.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use insitu_host::figure::{Plot, Row, Series, Source};

    fn sample(paper: &str) -> PaperFigures {
        let rows = vec![
            Row::new("12 devices: speed-up", "x", 13.9).paper(7.6).measured(2.1).note("the link | bound"),
            Row::new("1 device: speed-up", "x", 1.2),
        ];
        let plot = Plot::lines("devices", "speed-up (x)", false, true)
            .with(Series::new("modeled", Source::Modeled, vec![[1.0, 1.2], [12.0, 13.9]]))
            .with(Series::new("paper", Source::Paper, vec![[12.0, 7.6]]));
        let bars = Plot::bars("path", "latency (us)", vec!["A".into(), "B".into()], false)
            .with(Series::new("modeled", Source::Modeled, vec![[0.0, 1.0], [1.0, 2.0]]))
            .with(Series::new("measured", Source::Measured, vec![[0.0, 0.5], [1.0, 3.0]]));
        PaperFigures {
            paper: paper.into(),
            cites: format!("{paper} (test)"),
            setup: "a test".into(),
            figures: vec![
                Figure::new("fig13", "speed-up", rows, Some(plot)),
                Figure::new("fig2", "bars", vec![Row::new("A", "us", 1.0).paper(1.1)], Some(bars)),
            ],
            detail: "raw".into(),
        }
    }

    #[test]
    fn a_table_has_every_value_and_the_verdict() {
        let t = figure_table(&sample("nascent").figures[0]);
        assert!(
            t.contains(
                "| 12 devices: speed-up | x | 7.600 | 13.90 | 2.100 | +83% (!) | the link \\| bound |"
            ),
            "{t}"
        );
        assert!(t.contains("| 1 device: speed-up | x | - | 1.200 | - |  |"), "{t}");
        assert!(t.contains("**Verdict:** 1 of 1 value(s) outside +-20%"), "{t}");
    }

    #[test]
    fn write_makes_plots_and_a_report_of_every_paper_in_the_folder() {
        let out = tempfile::tempdir().unwrap();
        let a = write(out.path(), &sample("psacs")).unwrap();
        let b = write(out.path(), &sample("nascent")).unwrap();
        for p in a.iter().chain(&b) {
            assert!(std::fs::metadata(p).unwrap().len() > 0, "{}", p.display());
        }
        let png = std::fs::read(out.path().join("nascent/fig13.png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(out.path().join("nascent/fig2.svg")).unwrap();
        for want in ["<svg", "latency (us)", "measured", "\nA\n"] {
            assert!(svg.contains(want), "{want} not in the SVG");
        }
        let report = std::fs::read_to_string(out.path().join("REPORT.md")).unwrap();
        // NASCENT comes before PSACS whatever the order they were written in, and both are there.
        let (n, p) = (report.find("## nascent (test)").unwrap(), report.find("## psacs (test)").unwrap());
        assert!(n < p);
        assert!(report.contains("![nascent (test) fig13](nascent/fig13.svg)"));
        assert!(report.contains("| nascent (test) | [fig13](#nascent-fig13) | **outside**"));
        assert!(report.contains("| nascent (test) | [fig2](#nascent-fig2) | **within**"));
        // The figures come back from their JSON.
        let back: PaperFigures =
            serde_json::from_slice(&std::fs::read(out.path().join("nascent/figures.json")).unwrap()).unwrap();
        let labels = |p: &PaperFigures| -> Vec<String> {
            p.figures.iter().flat_map(|f| f.rows.iter().map(|r| r.label.clone())).collect()
        };
        assert_eq!(labels(&back), labels(&sample("nascent")));
        assert_eq!(back.figures[0].verdict, sample("nascent").figures[0].verdict);
    }

    #[test]
    fn bad_names_are_refused_and_unreadable_figures_left_out() {
        let out = tempfile::tempdir().unwrap();
        assert!(matches!(write(out.path(), &sample("../x")), Err(ReportError::Invalid(_))));
        std::fs::create_dir(out.path().join("junk")).unwrap();
        std::fs::write(out.path().join("junk/figures.json"), b"{").unwrap();
        write(out.path(), &sample("nascent")).unwrap();
        let report = std::fs::read_to_string(write_report(out.path()).unwrap()).unwrap();
        assert!(report.contains("**Left out:**") && report.contains("junk/figures.json"), "{report}");
        assert!(report.contains("not a repro's figures.json") && report.contains("## nascent (test)"));
        // Every file was written beside itself and renamed into place: no partial one is left.
        for dir in [out.path().to_path_buf(), out.path().join("nascent")] {
            let left: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("partial"))
                .collect();
            assert!(left.is_empty(), "{left:?}");
        }
        assert!(out.path().join("nascent/fig13.png").is_file());
    }
}
