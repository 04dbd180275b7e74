// Render each TeX string of a JSON array (stdin) with KaTeX in display mode; strict, throwing on errors.
// Prints one JSON object: {"errors": [[index, message], ...]}.
const katex = require("katex");
let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const errors = [];
  JSON.parse(input).forEach((tex, index) => {
    try {
      katex.renderToString(tex, { displayMode: true, throwOnError: true, strict: "error" });
    } catch (error) {
      errors.push([index, String(error.message)]);
    }
  });
  process.stdout.write(JSON.stringify({ errors }));
});
