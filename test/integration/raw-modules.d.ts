/** Vite's `?raw` imports (a file's text), as vite/client declares them: used to read wrangler.toml in workerd. */
declare module "*?raw" {
  const text: string;
  export default text;
}
