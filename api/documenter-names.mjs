// Loaded by api/run.mjs into api-documenter (node --import): pages of their own for names that
// differ from another name of their scope only in case. api-documenter names a page after the
// item, lower-cased, so `health` (the process-wide catalog) and `Health` (the deprecated name of
// HealthCatalog) were both otel-lifeline.health.md, and the last one written took the page and the
// links of the other (microsoft/rushstack#4311); so did lifelineParts() and LifelineParts. A name in
// API_DOCUMENTER_CASE_NAMES (a JSON array, from run.mjs: each such set but its name with the fewest
// capitals) writes each capital as `-` and the letter: `Health` is otel-lifeline.-health.md, beside
// health's otel-lifeline.health.md. Identifiers have no `-`, so these pages meet no other page.
// Declarations merged under one name (`Health`, a value and a type) still share a page.
import { createRequire } from 'node:module';

const names = new Set(JSON.parse(process.env.API_DOCUMENTER_CASE_NAMES ?? '[]'));
// The CommonJS module the api-documenter command runs (an import would load its ESM copy).
const { Utilities } = createRequire(import.meta.url)('@microsoft/api-documenter/lib/utils/Utilities');
const safeFilename = Utilities.getSafeFilenameForName.bind(Utilities);
Utilities.getSafeFilenameForName = (name) =>
  safeFilename(names.has(name) ? name.replace(/[A-Z]/g, (capital) => `-${capital.toLowerCase()}`) : name);
