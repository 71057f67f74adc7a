//! A paper's figure as a reader checks it: rows of (the paper's value | modeled | measured here), a verdict
//! against the paper, and the series to plot. The repros build them from their runs; the `insitu-report`
//! crate writes them as Markdown tables, PNG and SVG plots, and one `REPORT.md`.
//!
//! A row's paper value is what the paper's text states: one value, a range ("4.6x-5.7x"), or a bound
//! ("more than 20x"). The deviation is the modeled value's distance to it, `modeled / paper - 1`, and 0
//! inside a range or past a bound. A figure is within the paper when every row with a paper value is within
//! [`TOLERANCE`] of it, or past it for a bound (a claim holds or not); where one is not, its verdict names
//! the worst row and the row's note, which the repro writes from the model's stages (which stage made the
//! modeled value what it is).

use serde::{Deserialize, Serialize};

use crate::model::Modeled;

/// How far a modeled value may be from the paper's and still count as reproduced.
pub const TOLERANCE: f64 = 0.20;

/// One value of a figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub label: String,
    pub unit: String,
    /// The paper's value: the value its text states, the geometric middle of a range, or a bound.
    #[serde(with = "num::opt")]
    pub paper: Option<f64>,
    /// The lower and upper ends of the paper's value (equal for one value; no upper end for "at least").
    #[serde(with = "num::opt")]
    pub paper_low: Option<f64>,
    #[serde(with = "num::opt")]
    pub paper_high: Option<f64>,
    /// The value the model gives on the repro's profile (the same on any machine).
    #[serde(with = "num")]
    pub modeled: f64,
    /// The value measured here, where the repro measures one.
    #[serde(with = "num::opt")]
    pub measured: Option<f64>,
    /// `modeled / paper - 1` (0 inside the paper's range), where the paper has a value.
    #[serde(with = "num::opt")]
    pub deviation: Option<f64>,
    /// Why the modeled value is what it is, from the model's stages; where the paper has no value, what
    /// the row shows.
    pub note: String,
}

impl Row {
    /// A row with no paper value (yet).
    pub fn new(label: impl Into<String>, unit: impl Into<String>, modeled: f64) -> Row {
        Row {
            label: label.into(),
            unit: unit.into(),
            paper: None,
            paper_low: None,
            paper_high: None,
            modeled,
            measured: None,
            deviation: None,
            note: String::new(),
        }
    }

    /// The paper's value.
    pub fn paper(mut self, v: f64) -> Row {
        (self.paper, self.paper_low, self.paper_high) = (Some(v), Some(v), Some(v));
        self.deviation = Some(deviation(self.modeled, Some(v), Some(v)));
        self
    }

    /// The paper's value where it is `Some` (a row of a sweep the text gives one point of).
    pub fn paper_opt(self, v: Option<f64>) -> Row {
        match v {
            Some(v) => self.paper(v),
            None => self,
        }
    }

    /// The paper's range, `low..=high`.
    pub fn paper_range(mut self, low: f64, high: f64) -> Row {
        (self.paper, self.paper_low, self.paper_high) = (Some((low * high).sqrt()), Some(low), Some(high));
        self.deviation = Some(deviation(self.modeled, Some(low), Some(high)));
        self
    }

    /// The paper's lower bound ("more than `low`").
    pub fn paper_at_least(mut self, low: f64) -> Row {
        (self.paper, self.paper_low, self.paper_high) = (Some(low), Some(low), None);
        self.deviation = Some(deviation(self.modeled, Some(low), None));
        self
    }

    /// The value measured here.
    pub fn measured(mut self, v: f64) -> Row {
        self.measured = Some(v);
        self
    }

    /// The value measured here, where there is one.
    pub fn measured_opt(mut self, v: Option<f64>) -> Row {
        self.measured = v;
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }

    /// Whether the modeled value is within [`TOLERANCE`] of the paper's (`None` without a paper value). A
    /// bound is a claim ("at least 20% faster"), and holds or not: a modeled 0.99x is no advantage, though
    /// within 20% of the 1.2x claimed.
    pub fn within(&self) -> Option<bool> {
        let bound = self.paper_low.is_some() && self.paper_high.is_none();
        self.deviation.map(|d| d.is_finite() && if bound { d >= 0.0 } else { d.abs() <= TOLERANCE + 1e-12 })
    }
}

fn deviation(modeled: f64, low: Option<f64>, high: Option<f64>) -> f64 {
    if modeled.is_nan() {
        return f64::NAN; // nothing modeled: never within
    }
    match (low, high) {
        (Some(l), _) if modeled < l => modeled / l - 1.0,
        (_, Some(h)) if modeled > h => modeled / h - 1.0,
        _ => 0.0,
    }
}

/// Where a plotted series comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Paper,
    Modeled,
    Measured,
}

/// One line (or set of bars) of a plot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub source: Source,
    /// (x, y); on a plot with categories, x is the category's index.
    pub points: Vec<[f64; 2]>,
}

impl Series {
    /// A series of the finite points of `points` (a plot cannot place the others).
    pub fn new(name: impl Into<String>, source: Source, points: Vec<[f64; 2]>) -> Series {
        let points = points.into_iter().filter(|p| p[0].is_finite() && p[1].is_finite()).collect();
        Series { name: name.into(), source, points }
    }
}

/// What to draw: axes named like the paper's figure, and the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plot {
    pub x_label: String,
    pub y_label: String,
    pub x_log: bool,
    pub y_log: bool,
    /// The x axis's categories (bars); empty for a numeric x axis (lines).
    pub categories: Vec<String>,
    pub series: Vec<Series>,
}

impl Plot {
    /// Lines over a numeric x axis.
    pub fn lines(x_label: impl Into<String>, y_label: impl Into<String>, x_log: bool, y_log: bool) -> Plot {
        Plot {
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log,
            y_log,
            categories: Vec::new(),
            series: Vec::new(),
        }
    }

    /// Grouped bars, one group per category.
    pub fn bars(
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        categories: Vec<String>,
        y_log: bool,
    ) -> Plot {
        Plot {
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            y_log,
            categories,
            series: Vec::new(),
        }
    }

    /// Adds a series; one with no points is left out.
    pub fn with(mut self, s: Series) -> Plot {
        if !s.points.is_empty() {
            self.series.push(s);
        }
        self
    }
}

/// How a figure compares with the paper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Rows with a paper value, and how many of them are outside [`TOLERANCE`].
    pub checked: usize,
    pub outside: usize,
    /// `None` where the paper's text gives no value to check.
    pub within: Option<bool>,
    /// One line: within, or the worst row, its deviation and why.
    pub line: String,
}

/// One figure (or table) of a paper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Named like the paper's: `fig13`, `table1`.
    pub id: String,
    pub title: String,
    pub rows: Vec<Row>,
    pub plot: Option<Plot>,
    pub verdict: Verdict,
}

impl Figure {
    /// A figure of `rows`, with its verdict.
    pub fn new(
        id: impl Into<String>,
        title: impl Into<String>,
        rows: Vec<Row>,
        plot: Option<Plot>,
    ) -> Figure {
        let verdict = verdict(&rows);
        Figure { id: id.into(), title: title.into(), rows, plot, verdict }
    }

    /// The same figure, its paper values shown but not checked, for `reason` (the verdict says so).
    pub fn not_checked(mut self, reason: impl Into<String>) -> Figure {
        if self.verdict.checked == 0 {
            self.verdict.line = format!("not checked against the paper: {}", reason.into());
        }
        self
    }
}

fn verdict(rows: &[Row]) -> Verdict {
    let checked: Vec<&Row> = rows.iter().filter(|r| r.deviation.is_some()).collect();
    let outside: Vec<&Row> = checked.iter().copied().filter(|r| r.within() == Some(false)).collect();
    let pct = (TOLERANCE * 100.0).round();
    let line = if checked.is_empty() {
        "the paper's text gives no value to check here: compare the plot's shape with the paper's figure"
            .into()
    } else if outside.is_empty() {
        format!("within +-{pct}% of the paper: all {} value(s) the paper states", checked.len())
    } else {
        let worst = outside
            .iter()
            .max_by(|a, b| dev_of(a).abs().total_cmp(&dev_of(b).abs()))
            .copied()
            .unwrap_or(outside[0]);
        let why = if worst.note.is_empty() { "no reason recorded".into() } else { worst.note.clone() };
        format!(
            "{} of {} value(s) outside +-{pct}% of the paper's (or short of its bound); furthest: {}: modeled {} vs paper {} ({:+.0}%): {}",
            outside.len(),
            checked.len(),
            worst.label,
            fmt_value(worst.modeled),
            paper_text(worst),
            dev_of(worst) * 100.0,
            why
        )
    };
    Verdict {
        checked: checked.len(),
        outside: outside.len(),
        within: (!checked.is_empty()).then_some(outside.is_empty()),
        line,
    }
}

fn dev_of(r: &Row) -> f64 {
    r.deviation.unwrap_or(0.0)
}

/// The paper's value as the text states it: `7.6`, `4.6-5.7`, `>= 20`.
pub fn paper_text(r: &Row) -> String {
    match (r.paper_low, r.paper_high) {
        (Some(l), Some(h)) if (l - h).abs() <= 1e-12 * h.abs() => fmt_value(l),
        (Some(l), Some(h)) => format!("{}-{}", fmt_value(l), fmt_value(h)),
        (Some(l), None) => format!(">= {}", fmt_value(l)),
        _ => "-".into(),
    }
}

/// A value with about four significant digits.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{v:.3e}")
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.3e}")
    }
}

/// Seconds in the unit that reads best: `2.93 ms`, `1.20 s`.
pub fn fmt_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{} s", fmt_value(s))
    } else if s >= 1e-3 {
        format!("{} ms", fmt_value(s * 1e3))
    } else {
        format!("{} us", fmt_value(s * 1e6))
    }
}

/// A paper's figures from one repro run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaperFigures {
    /// The repro's name: `nascent`, `psacs`, `intersect`, `selfsort`, `bluedbm-net`.
    pub paper: String,
    /// The paper, as cited: `NASCENT (FPGA '21)`.
    pub cites: String,
    /// What was run: profile, host, data sizes, quick or full.
    pub setup: String,
    pub figures: Vec<Figure>,
    /// The run's full tables, as the repro prints them.
    pub detail: String,
}

/// The stage that made a run's modeled time what it is, in words: the bound that took the largest share
/// of the time, and the phase where it took most (`71% bound by shared host link, most in "dev12 read"`).
pub fn explain(m: &Modeled) -> String {
    use std::collections::BTreeMap;
    let mut by_bound: BTreeMap<String, f64> = BTreeMap::new();
    for ph in &m.phases {
        *by_bound.entry(bound_kind(&ph.bottleneck)).or_default() += ph.time_s;
    }
    let Some((bound, t)) = by_bound.iter().max_by(|a, b| a.1.total_cmp(b.1)) else {
        return "no modeled work".into();
    };
    let phase = m
        .phases
        .iter()
        .filter(|ph| bound_kind(&ph.bottleneck) == *bound)
        .max_by(|a, b| a.time_s.total_cmp(&b.time_s));
    let stage = phase
        .and_then(|ph| {
            ph.devices
                .iter()
                .flat_map(|d| d.compute_stages.iter())
                .max_by(|a, b| a.1.total_cmp(b.1))
                .filter(|_| bound == "device compute")
                .map(|(k, _)| format!(", stage {k}"))
        })
        .unwrap_or_default();
    format!(
        "{:.0}% of its {} bound by {bound}{}{stage}",
        100.0 * t / m.time_s.max(f64::MIN_POSITIVE),
        fmt_seconds(m.time_s),
        phase.map_or(String::new(), |ph| format!(", most in phase \"{}\"", ph.name)),
    )
}

/// `device 3 flash` -> `device flash`.
fn bound_kind(bottleneck: &str) -> String {
    let mut words: Vec<&str> = bottleneck.split(' ').collect();
    if words.len() > 2 && words[0] == "device" && words[1].parse::<u32>().is_ok() {
        words.remove(1);
    }
    words.join(" ")
}

/// Numbers in JSON, where a value may be unbounded (a ratio over zero host work is infinite): finite values
/// as numbers, the others as the strings `"inf"`, `"-inf"` and `"nan"`.
mod num {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Num {
        Finite(f64),
        Other(String),
    }

    fn to(v: f64) -> Num {
        if v.is_finite() {
            Num::Finite(v)
        } else if v.is_nan() {
            Num::Other("nan".into())
        } else {
            Num::Other(if v > 0.0 { "inf" } else { "-inf" }.into())
        }
    }

    fn from<E: serde::de::Error>(n: Num) -> Result<f64, E> {
        match n {
            Num::Finite(v) => Ok(v),
            Num::Other(s) => match s.as_str() {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "nan" => Ok(f64::NAN),
                _ => Err(E::custom(format!("not a number: {s:?}"))),
            },
        }
    }

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        to(*v).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        from(Num::deserialize(d)?)
    }

    pub mod opt {
        use super::*;

        pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
            v.map(to).serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
            Option::<Num>::deserialize(d)?.map(from).transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deviation_is_zero_inside_a_range_and_past_a_bound() {
        let r = Row::new("x", "x", 5.0).paper_range(4.6, 5.7);
        assert_eq!(r.deviation, Some(0.0));
        let r = Row::new("x", "x", 2.3).paper_range(4.6, 5.7);
        assert!((r.deviation.unwrap() - (2.3 / 4.6 - 1.0)).abs() < 1e-12);
        let r = Row::new("x", "x", 30.0).paper_at_least(20.0);
        assert_eq!(r.deviation, Some(0.0));
        assert_eq!(paper_text(&r), ">= 20.00");
        assert!(r.within().unwrap());
        // A bound not reached is not within, however close.
        let r = Row::new("x", "x", 0.99).paper_at_least(1.2);
        assert!(r.deviation.unwrap() > -TOLERANCE && !r.within().unwrap());
        let r = Row::new("x", "x", f64::NAN).paper(7.6);
        assert_eq!(r.within(), Some(false), "a value not modeled is not within");
        let r = Row::new("x", "x", 9.5).paper(7.6);
        assert!(!r.within().unwrap());
        let r = Row::new("x", "x", 9.0).paper(7.6 * 1.2);
        assert!(r.within().unwrap());
        assert_eq!(Row::new("x", "x", 1.0).within(), None);
    }

    #[test]
    fn the_verdict_names_the_furthest_row_and_its_reason() {
        let rows = vec![
            Row::new("a", "x", 1.0).paper(1.1),
            Row::new("b", "x", 3.0).paper(1.0).note("the link is slower"),
            Row::new("c", "x", 2.0).paper(1.0).note("the sort is slower"),
            Row::new("d", "x", 2.0),
        ];
        let f = Figure::new("fig1", "t", rows, None);
        assert_eq!((f.verdict.checked, f.verdict.outside, f.verdict.within), (3, 2, Some(false)));
        assert!(f.verdict.line.contains("furthest: b") && f.verdict.line.ends_with("the link is slower"));
        assert!(f.verdict.line.contains("+200%"), "{}", f.verdict.line);
        let f = Figure::new("fig1", "t", vec![Row::new("a", "x", 1.0).paper(1.1)], None);
        assert_eq!(f.verdict.within, Some(true));
        let f = Figure::new("fig1", "t", vec![Row::new("a", "x", 1.0)], None);
        assert_eq!(f.verdict.within, None);
        // A figure whose paper values are only shown says why in its verdict; a checked one keeps its own.
        let f = Figure::new("fig1", "t", vec![Row::new("a", "x", 1.0)], None).not_checked("traces missing");
        assert_eq!(
            (f.verdict.within, f.verdict.line.as_str()),
            (None, "not checked against the paper: traces missing")
        );
        let f = Figure::new("fig1", "t", vec![Row::new("a", "x", 1.0).paper(1.1)], None).not_checked("x");
        assert!(f.verdict.line.starts_with("within"));
    }

    #[test]
    fn unbounded_values_survive_json() {
        let r = Row::new("x", "x", f64::INFINITY).paper_at_least(20.0).measured(f64::NAN);
        let back: Row = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.modeled, f64::INFINITY);
        assert!(back.measured.unwrap().is_nan());
        assert_eq!((back.deviation, back.paper_high), (Some(0.0), None));
        assert!(serde_json::from_str::<Row>(
            &serde_json::to_string(&r).unwrap().replace("\"inf\"", "\"lots\"")
        )
        .is_err());
        let s = Series::new("s", Source::Modeled, vec![[1.0, f64::INFINITY], [2.0, 3.0], [f64::NAN, 1.0]]);
        assert_eq!(s.points, vec![[2.0, 3.0]]);
    }

    #[test]
    fn bound_kinds_drop_the_device_number() {
        assert_eq!(bound_kind("device 11 compute"), "device compute");
        assert_eq!(bound_kind("shared host link"), "shared host link");
        assert_eq!(bound_kind("device 0 host link"), "device host link");
    }
}
