// Render each TeX string of a JSON array (stdin) with MathJax 3 (mathjax-full, TeX input with the
// base and ams packages a default page has, SVG output) in display mode; a TeX error is an error,
// not red text. Prints {"results": [{"error": message or null, "mathml": serialized MathML or null}, ...]}.
const { mathjax } = require("mathjax-full/js/mathjax.js");
const { TeX } = require("mathjax-full/js/input/tex.js");
const { SVG } = require("mathjax-full/js/output/svg.js");
const { liteAdaptor } = require("mathjax-full/js/adaptors/liteAdaptor.js");
const { RegisterHTMLHandler } = require("mathjax-full/js/handlers/html.js");
const { SerializedMmlVisitor } = require("mathjax-full/js/core/MmlTree/SerializedMmlVisitor.js");
const { STATE } = require("mathjax-full/js/core/MathItem.js");
require("mathjax-full/js/input/tex/base/BaseConfiguration.js");
require("mathjax-full/js/input/tex/ams/AmsConfiguration.js");

const adaptor = liteAdaptor();
RegisterHTMLHandler(adaptor);
const tex = new TeX({ packages: ["base", "ams"], formatError: (jax, error) => { throw error; } });
const doc = mathjax.document("", { InputJax: tex, OutputJax: new SVG({ fontCache: "none" }) });
const visitor = new SerializedMmlVisitor();

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const results = JSON.parse(input).map((source) => {
    try {
      const svg = adaptor.outerHTML(doc.convert(source, { display: true }));  // tex2svg
      if (svg.includes("data-mjx-error") || svg.includes("<merror")) return { error: "merror in output", mathml: null };
      const mml = doc.convert(source, { display: true, end: STATE.CONVERT - 1 });
      return { error: null, mathml: visitor.visitTree(mml) };
    } catch (error) {
      return { error: String(error.message || error), mathml: null };
    }
  });
  process.stdout.write(JSON.stringify({ results }));
});
