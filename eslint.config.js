import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  // compat/undici-suite: a checkout of undici and run outputs live there (see its README.md).
  { ignores: ['dist/', 'build/', 'dist.bundle/', 'node_modules/', '.cache/', 'compat/undici-suite/undici/', 'compat/undici-suite/results/', 'compat/undici-suite/lifeline-snapshot/'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/no-unused-vars': ['error', { varsIgnorePattern: '^_', argsIgnorePattern: '^_' }],
    },
  },
  {
    // vitest's asymmetric matchers (expect.objectContaining, …) are typed `any` by design.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
  {
    files: ['**/*.{js,mjs,cjs}'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: globals.node,
    },
  },
  {
    // The CommonJS fixture exists to prove register mode works on CommonJS apps.
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // A fixture service of the adoption tests written as CommonJS .js ("type": "commonjs"), tested with jest's globals.
    files: ['test/fixtures/services/cjs-express-axios/**/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node, ...globals.jest } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The CommonJS fixture service with the auto-instrumentations (Express, winston).
    files: ['test/fixtures/services/cjs-express-winston-auto/**/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
