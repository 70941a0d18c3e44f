export * from './attributes.js';
