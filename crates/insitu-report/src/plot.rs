//! A figure's plot, as SVG and PNG, through `plotters`. Lines over a numeric x axis (linear or log), or
//! grouped bars over categories. The paper's values are large dots, modeled values solid lines, measured
//! values thin dashed lines; a modeled, measured and paper series of one quantity (named `"<quantity>,
//! modeled"` and so on) share a colour.

use std::path::Path;
use std::sync::OnceLock;

use insitu_host::figure::{Plot, Series, Source};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{ReportError, Result};

const SIZE: (u32, u32) = (960, 600);

/// Ten colours told apart easily (Tableau's), none too pale on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws `p` into `svg` and `png`.
pub fn draw(p: &Plot, title: &str, svg: &Path, png: &Path) -> Result<()> {
    font(png)?;
    render(SVGBackend::new(svg, SIZE).into_drawing_area(), p, title).map_err(|d| fail(svg, d))?;
    render(BitMapBackend::new(png, SIZE).into_drawing_area(), p, title).map_err(|d| fail(png, d))?;
    Ok(())
}

fn fail(path: &Path, detail: String) -> ReportError {
    ReportError::Plot { path: path.to_path_buf(), detail }
}

/// The embedded DejaVu Sans, registered once for the text of every plot.
fn font(path: &Path) -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(ReportError::Plot {
            path: path.to_path_buf(),
            detail: "the embedded font could not be loaded".into(),
        })
    }
}

fn render<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    p: &Plot,
    title: &str,
) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (x, y) = ranges(p);
    match (p.x_log && p.categories.is_empty(), p.y_log) {
        (false, false) => chart(&root, p, title, x, y.clone(), y.start),
        (true, false) => chart(&root, p, title, x.log_scale(), y.clone(), y.start),
        (false, true) => chart(&root, p, title, x, y.clone().log_scale(), y.start),
        (true, true) => chart(&root, p, title, x.log_scale(), y.clone().log_scale(), y.start),
    }?;
    root.present().map_err(|e| e.to_string())
}

fn chart<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    p: &Plot,
    title: &str,
    x: X,
    y: Y,
    y_floor: f64,
) -> std::result::Result<(), String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut c = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
        .map_err(e)?;
    let cats = &p.categories;
    let cat_label = |v: &f64| -> String {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
            cats[i as usize].clone()
        } else {
            String::new()
        }
    };
    let num_label = |v: &f64| axis_value(*v);
    let mut mesh = c.configure_mesh();
    mesh.x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17));
    mesh.y_label_formatter(&num_label);
    if cats.is_empty() {
        mesh.x_label_formatter(&num_label);
    } else {
        mesh.x_labels(cats.len() + 1).x_label_formatter(&cat_label).disable_x_mesh();
    }
    mesh.draw().map_err(e)?;

    let colours = colour_keys(&p.series);
    for (k, s) in p.series.iter().enumerate() {
        let colour = PALETTE[colours[k] % PALETTE.len()].to_rgba();
        let pts: Vec<(f64, f64)> =
            s.points.iter().map(|p| (p[0], p[1])).filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
        if !cats.is_empty() {
            // Grouped bars: series `j` of `n` takes its slot of each category's 0.8 width.
            let (j, n) = (k, p.series.len());
            let w = 0.8 / n as f64;
            let style = if s.source == Source::Measured { colour.stroke_width(2) } else { colour.filled() };
            c.draw_series(pts.iter().map(|&(x, y)| {
                let left = x - 0.4 + j as f64 * w;
                Rectangle::new([(left, y_floor), (left + w * 0.9, y)], style)
            }))
            .map_err(e)?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], style));
            continue;
        }
        match s.source {
            Source::Paper => {
                c.draw_series(pts.iter().map(|&p| Circle::new(p, 7, colour.filled())))
                    .map_err(e)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| Circle::new((x + 8, y), 6, colour.filled()));
            }
            Source::Modeled => {
                c.draw_series(LineSeries::new(pts.clone(), colour.stroke_width(3)).point_size(3))
                    .map_err(e)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
                    });
            }
            Source::Measured => {
                c.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, colour.stroke_width(2)))
                    .map_err(e)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(1))
                    });
                c.draw_series(pts.iter().map(|&p| TriangleMarker::new(p, 5, colour.filled()))).map_err(e)?;
            }
        }
    }
    if !p.series.is_empty() {
        c.configure_series_labels()
            .position(legend_corner(p))
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
    }
    Ok(())
}

/// The corner (or side) of the plot whose legend-sized box (about a third of the width and of the
/// height) covers the fewest points, for the legend (upper corners first).
fn legend_corner(p: &Plot) -> SeriesLabelPosition {
    let (x, y) = ranges(p);
    let frac = |v: f64, r: &std::ops::Range<f64>, log: bool| {
        if log {
            (v.max(f64::MIN_POSITIVE).ln() - r.start.ln()) / (r.end.ln() - r.start.ln())
        } else {
            (v - r.start) / (r.end - r.start)
        }
    };
    let mut counts = [0usize; 6];
    for q in p.series.iter().flat_map(|s| s.points.iter()) {
        let (fx, fy) = (frac(q[0], &x, p.x_log && p.categories.is_empty()), frac(q[1], &y, p.y_log));
        let (left, right, up, down) = (fx < 0.38, fx > 0.62, fy > 0.65, fy < 0.35);
        let middle = (0.3..0.7).contains(&fy);
        let hits = [left && up, right && up, right && down, left && down, right && middle, left && middle];
        for (i, hit) in hits.into_iter().enumerate() {
            counts[i] += hit as usize;
        }
    }
    let places = [
        SeriesLabelPosition::UpperLeft,
        SeriesLabelPosition::UpperRight,
        SeriesLabelPosition::LowerRight,
        SeriesLabelPosition::LowerLeft,
        SeriesLabelPosition::MiddleRight,
        SeriesLabelPosition::MiddleLeft,
    ];
    // A bar fills its slot from the bottom: only the upper places can be clear of bars.
    let candidates = if p.categories.is_empty() { 0..places.len() } else { 0..2 };
    let best = candidates.min_by_key(|&i| (counts[i], i)).unwrap_or(0);
    places[best].clone()
}

/// An axis label: four significant digits at most, no trailing zeros.
fn axis_value(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { format!("{v}") };
    }
    let decimals = (3 - v.abs().log10().floor() as i32).clamp(0, 8) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Each series' colour index: one per quantity, whatever its source.
fn colour_keys(series: &[Series]) -> Vec<usize> {
    let mut keys: Vec<String> = Vec::new();
    series
        .iter()
        .map(|s| {
            let key = match s.name.rsplit_once(", ") {
                Some((q, "modeled" | "measured" | "paper")) => q.to_string(),
                _ => s.name.clone(),
            };
            keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                keys.push(key);
                keys.len() - 1
            })
        })
        .collect()
}

/// The axes' ranges: every finite point with room around it; positive where the axis is logarithmic;
/// categories from -0.5 to n - 0.5.
fn ranges(p: &Plot) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let pts =
        || p.series.iter().flat_map(|s| s.points.iter()).filter(|q| q[0].is_finite() && q[1].is_finite());
    // Bars rise from the bottom: room above the tallest for the legend.
    let bars = !p.categories.is_empty();
    let span = |vals: Vec<f64>, log: bool, from_zero: bool| -> std::ops::Range<f64> {
        let vals: Vec<f64> = vals.into_iter().filter(|v| !log || *v > 0.0).collect();
        let (lo, hi) =
            vals.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
        if !lo.is_finite() {
            return if log { 0.1..10.0 } else { 0.0..1.0 };
        }
        if log {
            let (lo, hi) = if lo == hi { (lo / 2.0, hi * 2.0) } else { (lo, hi) };
            // Bars: the top third of the decades left clear.
            let top = if bars && from_zero { (hi / lo * 1.6).powf(0.5) } else { 1.6 };
            lo / 1.6..hi * top
        } else {
            let lo = if from_zero { lo.min(0.0) } else { lo };
            let pad = if hi > lo { (hi - lo) * 0.08 } else { hi.abs().max(1.0) };
            let top = if bars && from_zero { pad * 5.0 } else { pad };
            (if from_zero && lo >= 0.0 { lo } else { lo - pad })..hi + top
        }
    };
    let x = if p.categories.is_empty() {
        span(pts().map(|q| q[0]).collect(), p.x_log, false)
    } else {
        -0.5..p.categories.len() as f64 - 0.5
    };
    (x, span(pts().map(|q| q[1]).collect(), p.y_log, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_values_are_short() {
        assert_eq!(axis_value(3.0), "3");
        assert_eq!(axis_value(2.5), "2.5");
        assert_eq!(axis_value(0.125), "0.125");
        assert_eq!(axis_value(1500.0), "1500");
        assert_eq!(axis_value(0.0001234), "0.0001234");
    }

    #[test]
    fn quantities_share_a_colour_across_sources() {
        let s = |n: &str| Series::new(n, Source::Modeled, vec![]);
        let keys = colour_keys(&[
            s("time, modeled"),
            s("energy, modeled"),
            s("time, paper"),
            s("modeled"),
            s("energy, measured"),
        ]);
        assert_eq!(keys, vec![0, 1, 0, 2, 1]);
    }

    #[test]
    fn ranges_hold_every_point_and_stay_positive_on_log_axes() {
        let p = Plot::lines("x", "y", true, true).with(Series::new(
            "a",
            Source::Modeled,
            vec![[1.0, 0.5], [12.0, 150.0], [f64::NAN, 1.0]],
        ));
        let (x, y) = ranges(&p);
        assert!(x.start > 0.0 && x.start < 1.0 && x.end > 12.0);
        assert!(y.start > 0.0 && y.start < 0.5 && y.end > 150.0);
        let p = Plot::bars("x", "y", vec!["a".into(), "b".into(), "c".into()], false).with(Series::new(
            "a",
            Source::Modeled,
            vec![[0.0, 2.0]],
        ));
        let (x, y) = ranges(&p);
        assert_eq!((x.start, x.end), (-0.5, 2.5));
        assert_eq!(y.start, 0.0);
    }
}
