// Empty stand-in for @aws/agent-inspector (see package.json).
module.exports = {};
