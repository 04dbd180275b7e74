// Render each TeX string of a JSON array (stdin) with KaTeX in display mode, strict, throwing on
// errors, as MathML. Prints {"results": [{"error": message or null, "mathml": MathML or null}, ...]}.
const katex = require("katex");
let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const results = JSON.parse(input).map((tex) => {
    try {
      const mathml = katex.renderToString(tex, { displayMode: true, throwOnError: true, strict: "error", output: "mathml" });
      return { error: null, mathml };
    } catch (error) {
      return { error: String(error.message), mathml: null };
    }
  });
  process.stdout.write(JSON.stringify({ results }));
});
