// Replace each chart's static SVG with an interactive Vega view, offline. The SVG stays if
// the bundle is missing or a chart fails, so the page never shows an empty chart.
"use strict";
(function () {
  if (typeof window.vegaEmbed !== "function") {
    return;
  }
  document.querySelectorAll(".vega-chart").forEach(function (holder) {
    var source = document.getElementById(holder.dataset.specId);
    if (!source) {
      return;
    }
    var spec = JSON.parse(source.textContent);
    var target = document.createElement("div");
    target.className = "vega-interactive";
    holder.appendChild(target);
    window.vegaEmbed(target, spec, { mode: "vega-lite", actions: false, renderer: "svg" }).then(function () {
      var fallback = holder.querySelector(":scope > svg");
      if (fallback) {
        fallback.remove();
      }
    }).catch(function (error) {
      target.remove();
      console.warn("chart kept as static SVG:", error);
    });
  });
})();
