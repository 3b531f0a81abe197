"""The GeoTrain paper's published figures (section 6), quoted as data.

Values are copied from the paper's Tables 3-7 and the text of section 6.6, as
published, for side-by-side tables in the report. They cannot be reproduced digit
for digit: the paper's Table A.1 (model configurations) and its GPU mixes are not
public, and its Table 7 at lambda = 0 contradicts its own energy model
(``cost-model.md``). The report compares shapes: who wins, by how much, where the
exact methods stop.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CAVEAT", "PAPER", "SOURCE"]

SOURCE = "GeoTrain, section 6 (Tables 3-7, section 6.6 text)"
CAVEAT = (
    "The paper's figures are quoted as published. Its Table A.1 (model configurations) "
    "and its GPU mixes are not public, so our instances are generated stand-ins: compare "
    "shapes (who wins, by how much, where exact methods stop), not digits."
)

# Tables 3 and 4: (GPUs, layers, impr. Metis ms, GeoTrain best, mean, CI +-, gain %).
_TABLE3 = [
    (4, 12, 1979.8, 1979.8, 1979.8, 0.0, 0.0),
    (6, 12, 1754.2, 1750.2, 1750.2, 0.0, 0.2),
    (8, 12, 1354.5, 1254.8, 1254.8, 0.0, 7.4),
    (10, 12, 1323.6, 1233.4, 1233.4, 0.0, 6.8),
    (12, 12, 1099.5, 996.6, 996.6, 0.0, 9.4),
]
_TABLE4 = [
    (12, 8, 807.4, 801.9, 801.9, 0.0, 0.7),
    (12, 12, 1099.5, 996.6, 996.6, 0.0, 9.4),
    (12, 24, 1822.1, 1705.9, 1705.9, 0.0, 6.4),
    (12, 32, 2204.8, 2199.3, 2199.3, 0.0, 0.3),
    (12, 48, 2191.8, 1958.7, 1998.6, 38.7, 10.6),
]
_VERSUS_COLS = ("n", "layers", "metis_ms", "best_ms", "mean_ms", "ci_ms", "gain_pct")

# Table 5: (N, L, T* ms, GeoTrain ms, optimality %, seeds matching).
_TABLE5 = [
    (3, 12, 5291.165, 5291.165, 100.0, "10/10"),
    (4, 12, 1979.826, 1979.826, 100.0, "10/10"),
    (5, 12, 1878.830, 1878.830, 100.0, "10/10"),
    (6, 12, 1750.161, 1750.161, 100.0, "10/10"),
]
# Table 6: (N, L, space as printed, BF ms, BF s, B&B ms, B&B s, GeoTrain ms, GeoTrain s);
# None where the paper prints a dash (the 120 s budget ran out).
_TABLE6 = [
    (2, 12, "24", 5839.7, 0.0, 5839.7, 0.0, 5839.7, 13.3),
    (4, 12, "5.4K", 1979.8, 0.4, 1979.8, 0.3, 1979.8, 15.9),
    (6, 12, "637K", 1750.2, 16.6, 1750.2, 15.9, 1750.2, 18.8),
    (8, 12, "43.8M", None, None, None, None, 1254.8, 22.8),
    (10, 12, "1.8B", None, None, None, None, 1233.4, 32.5),
    (12, 12, "40.9B", None, None, None, None, 996.6, 29.4),
]
# Table 7: (lambda, T ms, E J, dT %, dE %, GPUs selected, knee); dT/dE vs the lambda=1 plan.
_TABLE7 = [
    (0.0, 1976.2, 519.4, 146.3, -25.0, "1x A100 PCIe", False),
    (0.1, 1232.7, 541.4, 53.7, -21.8, "2x A100 PCIe", True),
    (0.3, 1041.7, 571.1, 29.8, -17.6, "3x A100 PCIe", False),
    (0.5, 839.3, 651.5, 4.6, -6.0, "2x A100 SXM, 2x A100 PCIe", False),
    (0.7, 802.3, 692.8, None, None, "2x A100 SXM, 3x A100 PCIe", False),
    (0.9, 802.3, 692.8, None, None, "2x A100 SXM, 3x A100 PCIe", False),
    (1.0, 802.3, 692.8, None, None, "2x A100 SXM, 3x A100 PCIe", False),
]

PAPER: dict[str, dict[str, Any]] = {
    "table3": {
        "title": "Table 3. Iteration time vs. GPU count (L=12, H=2048, fixed heterogeneity mix)",
        "columns": _VERSUS_COLS,
        "rows": _TABLE3,
        "note": "Gain % = (T_Metis - T_MA best) / T_Metis; five seeds.",
    },
    "table4": {
        "title": "Table 4. Iteration time vs. model depth (12 GPUs, H=2048)",
        "columns": _VERSUS_COLS,
        "rows": _TABLE4,
        "note": "Variance only at L=48 (+-38.7 ms) over five seeds.",
    },
    "table5": {
        "title": "Table 5. GeoTrain recovers the exact optimum on every computable scenario",
        "columns": ("n", "layers", "t_star_ms", "geotrain_ms", "optimality_pct", "match"),
        "rows": _TABLE5,
        "note": "Four scenarios, 3-6 GPUs of four types; ten seeds each.",
    },
    "table6": {
        "title": "Table 6. Iteration time and planning time vs. GPU count (L=12)",
        "columns": ("n", "layers", "space", "bf_ms", "bf_s", "bnb_ms", "bnb_s", "ga_ms", "ga_s"),
        "rows": _TABLE6,
        "note": "Exact solvers exhaust the 120 s budget at N >= 8 (printed as a dash).",
    },
    "table7": {
        "title": "Table 7. Energy-time Pareto frontier (14 GPUs, 12 layers, H=2048)",
        "columns": ("lam", "t_ms", "e_j", "dt_pct", "de_pct", "gpus", "knee"),
        "rows": _TABLE7,
        "reference": {"label": "impr. Metis", "t_ms": 870.4, "e_j": 737.8, "dt_pct": 8.5,
                      "de_pct": 6.5, "gpus": "3x A100 SXM, 2x A100 PCIe"},
        "note": "Normalised by T_ref = 870.4 ms, E_ref = 737.8 J (the impr. Metis plan); "
                "knee by maximum perpendicular distance; all five seeds converge. The "
                "lambda = 0 row implies 262.8 W for a 250 W GPU, which eq. 14 cannot give.",
    },
    "network": {
        "title": "Section 6.6 network sensitivity (three sites; quoted from the text, Fig. 8)",
        # Gains of GeoTrain over impr. Metis, % of Metis' iteration time, as stated in the text.
        "latency": {
            "x": "base_latency_ms",
            "points": [(0.1, "10.4-13.4 (0.1-10 ms)"), (1.0, "10.4-13.4 (0.1-10 ms)"),
                       (10.0, "10.4-13.4 (0.1-10 ms)"), (50.0, "13.6 (peak)"), (100.0, "0")],
            "text": "Both planners exclude site A at every latency; B+C plans up to 10 ms; at "
                    "50 ms impr. Metis falls back to site C alone (1,996 ms) while GeoTrain "
                    "keeps a balanced B+C plan (1,757 ms); at 100 ms both use site C only.",
        },
        "bandwidth": {
            "x": "base_bandwidth_gbps",
            "points": [(5.0, "12.0 (peak)")],
            "text": "At low bandwidth both planners consolidate onto one site; GeoTrain turns "
                    "multi-site sooner (largest gain 12.0% at 5 Gbps); with abundant "
                    "bandwidth the two converge.",
        },
        "note": "Cross-site latency 0.1-100 ms at 10 Gbps; bandwidth 0.5-100 Gbps at 10 ms; "
                "ten runs averaged.",
    },
}
