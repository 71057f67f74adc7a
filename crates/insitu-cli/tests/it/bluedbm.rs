//! BlueDBM from the command line: the storage network's reproduction (Fig. 11).

use crate::Env;

#[test]
fn repro_bluedbm_net_gives_fig11_beside_the_paper() {
    let env = Env::new();
    let out = env.json(&["repro", "bluedbm-net"]);
    let rows = out["result"]["fig11"].as_array().unwrap();
    assert!(rows.len() >= 12);
    for r in rows {
        assert!(r["paper"].is_f64() && r["modeled"].is_f64(), "{r}");
        assert!(r.get("measured").is_some(), "{r}");
        let (paper, modeled) = (r["paper"].as_f64().unwrap(), r["modeled"].as_f64().unwrap());
        // Everything within 10% of the paper: 8.02 vs 8.2 Gb/s is the largest gap (the packet format).
        assert!((modeled / paper - 1.0).abs() < 0.1, "{r}");
    }
    let text = env.ok(&["repro", "bluedbm-net"]);
    assert!(text.contains("one stream, 8 hops") && text.contains("8.20"), "{text}");
    let err = env.fails(&["repro", "bluedbm-net", "--profile", "smartssd"]);
    assert!(err.contains("no storage network"), "{err}");
}
